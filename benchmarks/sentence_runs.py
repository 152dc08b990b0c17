"""The options of the benchmarks that decode test sentences offline."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from benchmarks.locations import DEFAULT_DATA, RESULTS_DIR


def sentence_benchmark_args(prog: str, doc: str,
                            argv: Sequence[str] | None) -> argparse.Namespace:
    """--data, --tiny, --sentences, --rounds and --out of an offline sentence benchmark."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help="corpora root (../shared/data)")
    parser.add_argument("--tiny", action="store_true", help="toy model, few sentences")
    parser.add_argument("--sentences", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, help="results directory (default: results/)")
    return parser.parse_args(argv)


def precision_benchmark_parser(prog: str, doc: str, *,
                               sentences: int) -> argparse.ArgumentParser:
    """--data, --sentences, --threads and --out of a benchmark that compares numeric
    precisions on test sentences (adapter_precision, cpu_bf16_quality)."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sentences", type=int, default=sentences)
    parser.add_argument("--threads", type=int, default=2,
                        help="torch threads (1 decodes faster on a machine shared by others)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    return parser

