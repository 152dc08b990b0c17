"""Greedy and beam search as strategy objects over log-probabilities; no I/O."""
