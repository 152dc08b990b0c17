"""One writer for every benchmark's results: the JSON + markdown pair (and a meta file), the
made-by line, a merge with the report's earlier text; and no benchmark writes its results
any other way."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from benchmarks.locations import RESULTS_DIR
from benchmarks.provenance import MADE_BY
from benchmarks.report_files import results_dir, write_report, write_stamped

ROOT = Path(__file__).resolve().parents[2]
LINE = "Made by `make bench-x` on a host, 2026-11-26."


def test_the_pair_and_the_meta_file(tmp_path: Path) -> None:
    paths = write_report(tmp_path / "out", "bench", {"b": 1, "a": "é"}, "# Bench\n\n| x |\n",
                         meta={"z": 1, "a": 2})
    assert [p.name for p in paths] == ["bench.json", "bench.meta.json", "bench.md"]
    assert json.loads(paths[0].read_text()) == {"b": 1, "a": "é"}
    assert "é" in paths[0].read_text(encoding="utf-8")  # readable, not \u escapes
    assert list(json.loads(paths[1].read_text())) == ["a", "z"]
    lines = paths[2].read_text().splitlines()
    assert lines[0] == "# Bench" and MADE_BY.match(lines[2]) and lines[4] == "| x |"


def test_without_meta_two_files_and_a_given_made_by_line(tmp_path: Path) -> None:
    paths = write_report(tmp_path, "bench", [1, Path("a/b")], "| x |\n", made_by=LINE)
    assert [p.name for p in paths] == ["bench.json", "bench.md"]
    assert json.loads(paths[0].read_text()) == [1, "a/b"]  # a path written as its text
    assert paths[1].read_text() == f"{LINE}\n\n| x |\n"


def test_merge_joins_the_new_report_with_the_earlier_text(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def merge(earlier: str, new: str) -> str:
        seen.append((earlier, new))
        return earlier + new

    write_report(tmp_path, "bench", {}, "first\n", made_by=LINE, merge=merge)
    write_report(tmp_path, "bench", {}, "second\n", made_by=LINE, merge=merge)
    assert seen[0] == ("", f"{LINE}\n\nfirst\n")
    assert (tmp_path / "bench.md").read_text() == f"{LINE}\n\nfirst\n{LINE}\n\nsecond\n"


def test_a_plain_text_report_is_stamped_too(tmp_path: Path) -> None:
    path = write_stamped(tmp_path / "deep" / "profile.txt", "torch threads: 2\n",
                         made_by=LINE)
    assert path.read_text() == f"{LINE}\n\ntorch threads: 2\n"


def test_toy_runs_write_beside_the_real_results(tmp_path: Path) -> None:
    assert results_dir(None) == RESULTS_DIR
    assert results_dir(None, tiny=True) == RESULTS_DIR / "tmp"
    assert results_dir(tmp_path, tiny=True) == tmp_path


# Files the benchmarks write that are not results: a decoding cache, a checkpoint's
# vocabulary, one training arm's result (read back into the report), fastText's training
# file of a text-fed router, a resumable bench's finished parts.
NOT_RESULTS = {"benchmarks/report_files.py", "benchmarks/quality/decode.py",
               "benchmarks/quality/work_cache.py",
               "benchmarks/speed/model.py", "benchmarks/quality/backbone/backbone_experiments.py",
               "benchmarks/quality/router/router_artifacts.py"}


def test_no_benchmark_writes_its_results_itself() -> None:
    writers = []
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("write_text", "dump")):
                writers.append(name)
    assert sorted(set(writers) - NOT_RESULTS) == []
