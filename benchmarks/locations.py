"""Where the repository, the benchmarks' results and the shared corpora are."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "benchmarks" / "results"  # <name>.json + <name>.md per benchmark
DEFAULT_DATA = Path("../shared/data")  # the corpora (`--data`); never read by tests
