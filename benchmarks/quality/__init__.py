"""Quality benchmarks, by subject: `evaluation/` (make eval, nmt-eval: every section of the
results table), `router/`, `precision/` (lower-precision weights), `backbone/` (training
the backbone), `text/` (markup and glossaries around the engine), `corrections/`,
`estimation/`. Here: the evaluation sets (`data`), cached batched decoding (`decode`) and
what is evaluated (`models`), which they share."""
