"""The learning-curve tool on a tiny backbone: every checkpoint copy scored once (re-runs
score only new ones), CPU-hours from the copy's progress, and the average of the last k
against the newest alone."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from benchmarks.quality.backbone.learning_curve import (
    cpu_hours,
    pending,
    session_cpu_seconds,
    sparkline,
    update,
)
from tests.tiny import ENGLISH, FRENCH, random_backbone, spm_bytes, tiny_config


def tiny_data(root: Path) -> Path:
    for kind, name, split in (("domains", "law", "dev"), ("domains", "medical", "dev"),
                              ("extra", "news", "test")):
        folder = root / "en-fr" / kind / name
        folder.mkdir(parents=True)
        for part in (split, "test"):
            (folder / f"{part}.en").write_text("\n".join(ENGLISH[:4]) + "\n")
            (folder / f"{part}.fr").write_text("\n".join(FRENCH[:4]) + "\n")
    return root


def save_copy(curve: Path, step: int, seed: int) -> None:
    curve.mkdir(parents=True, exist_ok=True)
    model = random_backbone(tiny_config(), seed=seed)
    torch.save({"model": model.state_dict(), "progress": {"step": step}},
               curve / f"step-{step}.pt")
    (curve / f"step-{step}.progress.json").write_text(json.dumps({"elapsed_s": 1800 * step}))


def arguments(tmp_path: Path) -> argparse.Namespace:
    run_files = tmp_path / "run"
    run_files.mkdir()
    (run_files / "config.json").write_text(json.dumps(tiny_config().to_dict()))
    (run_files / "spm.model").write_bytes(spm_bytes())
    return argparse.Namespace(curve=tmp_path / "curve", run_files=run_files,
                              data=tiny_data(tmp_path / "data"), run_threads=2,
                              bleu_sentences=2, min_gap=5, average=2, cpu_log=None,
                              session_start=None, session_start_cpu_hours=None,
                              out=tmp_path / "results" / "learning_curve")


def test_the_curve_scores_each_copy_once_and_the_average(tmp_path: Path) -> None:
    args = arguments(tmp_path)
    args.out.parent.mkdir()
    save_copy(args.curve, 10, seed=1)
    save_copy(args.curve, 12, seed=2)  # within min_gap of step 10: no point of its own
    first = update(args)
    assert [p["step"] for p in first["points"]] == [10]
    point = first["points"][0]
    assert point["cpu_hours"] == 10.0  # 18,000 s x 2 threads
    assert set(point["scores"]) == {"law", "medical", "news"}
    assert {"loss", "bleu"} <= set(point["scores"]["news"])
    [averaged] = first["averages"]
    assert averaged["averaged_steps"] == [10, 12]
    assert averaged["average"]["scores"] != averaged["newest"]["scores"]

    save_copy(args.curve, 20, seed=3)
    second = update(args)
    assert [p["step"] for p in second["points"]] == [10, 20]
    assert second["points"][0] == point  # not scored again
    assert [a["averaged_steps"] for a in second["averages"]] == [[10, 12], [12, 20]]
    table = args.out.with_suffix(".md").read_text()
    assert "| 20 | 20.00 |" in table and "Checkpoint averaging" in table


def test_pending_keeps_a_gap_from_scored_steps(tmp_path: Path) -> None:
    for step in (100, 300, 350, 900):
        (tmp_path / f"step-{step}.pt").write_bytes(b"")
    assert [p.name for p in pending(tmp_path, {100}, min_gap=200)] == \
        ["step-300.pt", "step-900.pt"]


def test_sparkline_spans_lowest_to_highest() -> None:
    assert sparkline([1.0, 2.0, 3.0]) == "▁▄█"
    assert sparkline([5.0, 5.0]) == "▁▁"


def test_cpu_hours_come_from_the_copy_log_where_it_has_them(tmp_path: Path) -> None:
    save_copy(tmp_path, 10, seed=1)  # 18,000 s of wall time at 2 threads: 10 CPU-h
    save_copy(tmp_path, 20, seed=2)
    log = tmp_path / "log"
    log.write_text("2026-11-25T02:46:59 step 10\n"
                   "2026-11-25T03:14:00 step 20 cpu_s_this_session 1800\n")
    session = session_cpu_seconds(log)
    assert session == {20: 1800.0}
    start = tmp_path / "step-10.pt"
    assert cpu_hours(tmp_path / "step-20.pt", 2, session=session, session_start=start) == 10.5
    assert cpu_hours(tmp_path / "step-20.pt", 2, session={}, session_start=None) == 20.0
    # a session start known to have cost less than its wall time says
    assert cpu_hours(tmp_path / "step-20.pt", 2, session=session, session_start=start,
                     start_hours=4.0) == 4.5
