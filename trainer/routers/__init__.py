"""The fastText router: training the classifier (classifier), its retraining settings
(settings), and teaching it a new domain (update), with the new domain's fair share of
the examples (balance) and the stored examples its text claims (overlap)."""
