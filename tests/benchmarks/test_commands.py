"""Every benchmark command that the Makefile, the docs, the README and the GPU scripts
give (`python -m benchmarks....`, `benchmarks/.../*.py|.sh`) names a file that exists: a
module moved without its commands fails here, not on a reader's machine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "Makefile", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
           *sorted((ROOT / "benchmarks").rglob("*.sh")),
           *sorted((ROOT / "benchmarks").rglob("*.py"))]
MODULE = re.compile(r"-m\s+(benchmarks(?:\.\w+)+)")
FILE = re.compile(r"(?<![\w/.])(benchmarks/[\w/]+\.(?:py|sh))")


def named(text: str) -> set[Path]:
    modules = {Path(*name.split(".")) for name in MODULE.findall(text)}
    return ({m.with_suffix(".py") if not (ROOT / m).is_dir() else m / "__init__.py"
             for m in modules} | {Path(name) for name in FILE.findall(text)})


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_benchmark_command_names_a_file_that_exists(source: Path) -> None:
    missing = sorted(str(p) for p in named(source.read_text(encoding="utf-8"))
                     if not (ROOT / p).is_file())
    assert missing == []


def test_the_pattern_finds_commands() -> None:
    found = named("make x: python -m benchmarks.speed.serve.serve_load --data d; "
                  "bash benchmarks/speed/gpu/gpu_device_run.sh")
    assert found == {Path("benchmarks/speed/serve/serve_load.py"),
                     Path("benchmarks/speed/gpu/gpu_device_run.sh")}
