"""Reproducible speed and quality benchmarks; results land in benchmarks/results/."""
