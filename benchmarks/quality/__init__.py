"""Quality benchmarks: `evaluate` (make eval, nmt-eval) runs every section (known domains,
families, fine-tuning, open domain, classifier, source reliance, significance) and writes
eval(.quick).{json,md}. The other modules are its sections and helpers."""
