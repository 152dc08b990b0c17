"""Reproducible benchmarks; results land in benchmarks/results/ (json + md), the dated runs
behind them in benchmarks/results/history/NOTES.md.

- `benchmarks.speed`: by subject: `engine/` (the engine against its peers, make
  bench-engine), `batching/`, `serve/` (the live server under load, make bench-serve),
  `adversarial/`, `gpu/` (the runs on a lent GPU machine);
- `benchmarks.quality`: by subject: `evaluation/` (make eval, nmt-eval), `router/`,
  `precision/`, `backbone/`, `text/` (markup, glossaries), `corrections/`, `estimation/`;
- `benchmarks.documents`: whole files through a live server (make bench-documents);
- here: what every kind shares: paths (`locations`), the made-by line (`provenance`), the
  one results writer (`report_files`), the host, a live server subprocess
  (`live_server`), the offline sentence runs' options.
"""
