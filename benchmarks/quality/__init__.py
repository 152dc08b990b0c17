"""Quality benchmarks: `evaluate` (make eval, nmt-eval) runs every section (known domains,
families, fine-tuning, open domain, classifier, source reliance, significance) and writes
eval(.quick).{json,md}. `markup` and `glossary` measure what the server does around the
engine (markup and placeholders kept, glossaries enforced). The other modules are
sections and helpers."""
