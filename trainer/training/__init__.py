"""Training a model, with no store or job in sight: parallel text (data, sampling), the
one training loop and run (loop, run), a domain module (modules) or a word-level mixture
(mixing) against a frozen backbone, checkpoint averaging (average) and dev-set scoring
(evaluate). The sidecar's jobs, the recipes and the GPU run all train through it."""
