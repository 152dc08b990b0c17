"""Fitting a backbone's quality estimator: from scratch for a shipped model (fit), and
refitted with a domain's dev sentences when the sidecar publishes its module (refit)."""
