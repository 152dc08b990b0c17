"""The evaluation harness (make eval, nmt-eval): `evaluate` runs every section (known domains,
families, fine-tuning, open domain, classifier, source reliance, significance) and writes
eval(.quick).{json,md}; the other modules are its sections, systems, targets and report."""
