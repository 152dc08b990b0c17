"""Reproducible benchmarks; results land in benchmarks/results/ (json + md).

- `benchmarks.speed`: engine speed against peers (`engine_speed`, make bench-engine),
  served load (`serve_load`, make bench-serve), adding a domain end to end (`hot_add`);
- `benchmarks.quality`: BLEU / chrF evaluation of the served system (`evaluate`, make eval,
  nmt-eval);
- `benchmarks.common`: the paths both share.
"""
