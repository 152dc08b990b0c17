"""Per-sentence quality: the model's signals from a scoring pass after decoding, features,
a calibrated estimator per backbone, detectors and recovery (docs/API.md, "Quality")."""
