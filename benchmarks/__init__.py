"""Reproducible benchmarks; results land in benchmarks/results/ (json + md).

- `benchmarks.speed`: engine speed against peers (`engine_speed`, make bench-engine),
  served load (`serve_load`, make bench-serve), adding a domain end to end (`hot_add`);
- `benchmarks.quality`: BLEU / chrF evaluation of the served system (`evaluate`, make eval,
  nmt-eval);
- `benchmarks.locations`: the paths both share; `benchmarks.sentence_runs`: the options
  and report files of the benchmarks that decode test sentences offline.
"""
