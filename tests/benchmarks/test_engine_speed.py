"""The engine speed benchmark at a toy size: every system runs, decodes exactly the forced
number of tokens, and the rows, ratios and targets are computed and written correctly.
Nothing here asserts on speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.provenance import MADE_BY
from benchmarks.speed.engine.engine_speed import (
    FAMILY_SYSTEMS,
    SYSTEMS,
    TINY,
    family_options,
    run_benchmark,
    system_options,
)
from benchmarks.speed.engine.measure import (
    DECODES,
    LengthMismatch,
    Row,
    check_lengths,
    measure,
    schedule,
)
from benchmarks.speed.engine.report import (
    TARGETS,
    Target,
    check_targets,
    markdown,
    paired_ratio,
    ratio,
    write_results,
)
from benchmarks.speed.engine.systems import Runner, mixed_members, random_adapter, random_override
from server.engine.artifacts import build_engine
from server.engine.engine import Member
from server.engine.families import get_family
from tests.tiny import tiny_backbone_files, tiny_config

TinyRun = tuple[list[Row], dict[str, Runner]]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> TinyRun:
    return run_benchmark(TINY, tmp_path_factory.mktemp("engine-speed"))


@pytest.mark.slow
def test_every_system_and_decode_has_a_row(tiny_run: TinyRun) -> None:
    rows, runners = tiny_run
    assert list(runners) == list(SYSTEMS)
    assert [(r.system, r.decode) for r in rows] == [(s, d) for s in SYSTEMS for d in DECODES]
    families = {"engine-float32-sf", "engine-float32-pa", "engine-float32-mixing",
                "engine-float32-mixing-lowrank"}
    assert set(FAMILY_SYSTEMS) == families
    assert {(r.system, r.decode) for r in rows if r.system in families} == {
        (s, d) for s in families for d in DECODES}


@pytest.mark.slow
def test_family_systems_report_ratios_without_targets(tiny_run: TinyRun) -> None:
    rows, _ = tiny_run
    checks = [c for c in check_targets(rows) if c.target.numerator in FAMILY_SYSTEMS]
    assert len(checks) == 4 * 2 * len(DECODES)  # vs one adapter and vs backbone only
    assert all(c.ratio is not None and c.ratio > 0 for c in checks)
    targeted = {(c.target.numerator, c.target.denominator) for c in checks
                if c.target.minimum is not None}
    assert targeted == {("engine-float32-mixing-lowrank", "engine-float32")}
    assert all(c.met is None for c in checks if c.target.minimum is None)
    assert "| mixing module / backbone only | greedy |" in markdown(rows, check_targets(rows),
                                                                   {"mode": "tiny"})


@pytest.mark.slow
def test_rows_schema(tiny_run: TinyRun, tmp_path: Path) -> None:
    rows, _ = tiny_run
    for row in rows:
        data = row.to_dict()
        assert {"system", "decode", "tokens_per_s"} <= set(data)
        assert isinstance(data["tokens_per_s"], float) and data["tokens_per_s"] > 0
        assert data["median_s"] > 0 and data["rounds"] == TINY.rounds
        assert data["tokens_per_run"] == TINY.batch * TINY.target_length
    written = json.loads(write_results(rows, {"mode": "tiny"}, tmp_path)[0].read_text())
    assert isinstance(written, list)
    assert [(r["system"], r["decode"]) for r in written] == [(r.system, r.decode) for r in rows]


@pytest.mark.slow
@pytest.mark.parametrize("beam_size", sorted(set(DECODES.values())))
def test_every_system_produces_exactly_the_forced_length(tiny_run: TinyRun,
                                                          beam_size: int) -> None:
    _, runners = tiny_run
    for name, runner in runners.items():
        assert runner(beam_size) == [TINY.target_length] * TINY.batch, name


def test_measure_refuses_a_system_that_decoded_other_lengths() -> None:
    def short(beam_size: int) -> list[int]:
        return [5, 5, 4, 5]

    with pytest.raises(LengthMismatch, match=r"short \(greedy\).*\(2, 4\)"):
        measure({"short": short}, rounds=1, batch=4, target_length=5, decodes={"greedy": 1})
    with pytest.raises(LengthMismatch, match="3 sentences for a batch of 4"):
        check_lengths("x", "greedy", [5, 5, 5], batch=4, target_length=5)


def test_measure_counts_tokens_and_takes_the_median() -> None:
    calls: list[int] = []

    def fake(beam_size: int) -> list[int]:
        calls.append(beam_size)
        return [3, 3]

    rows = measure({"a": fake, "b": fake}, rounds=3, batch=2, target_length=3)
    assert len(calls) == 2 * len(DECODES) * (3 + 1)  # a warm-up round, then 3 rounds
    assert [(r.system, r.decode, r.tokens_per_run, r.rounds) for r in rows] == [
        ("a", "greedy", 6, 3), ("a", "beam4", 6, 3), ("b", "greedy", 6, 3), ("b", "beam4", 6, 3)]
    assert all(r.tokens_per_s == pytest.approx(6 / r.median_s) for r in rows)
    assert all(len(r.round_s) == 3 and r.median_s == sorted(r.round_s)[1] for r in rows)


def test_the_paired_ratio_is_the_median_of_the_per_round_ratios() -> None:
    """Round 2 is slow for the engine only (a noisy phase of the host): the ratio of the
    medians follows the noise when it hits half the rounds, the paired one does not."""
    engine = Row("engine-int8", "beam4", 0.0, 0.0, 4, 32, 25, 800, [0.4, 0.6, 0.4, 0.5])
    peer = Row("ct2-int8", "beam4", 0.0, 0.0, 4, 32, 25, 800, [0.6, 0.6, 0.6, 0.75])
    assert paired_ratio([engine, peer], "engine-int8", "ct2-int8", "beam4") == \
        pytest.approx(1.5)  # per round: 1.5, 1.0, 1.5, 1.5
    assert paired_ratio([engine], "engine-int8", "ct2-int8", "beam4") is None
    unpaired = Row("ct2-int8", "beam4", 0.0, 0.0, 1, 32, 25, 800, [0.6])
    assert paired_ratio([engine, unpaired], "engine-int8", "ct2-int8", "beam4") is None


@pytest.mark.parametrize(("round_index", "expected"), [
    (0, ["a", "b", "c"]), (1, ["b", "c", "a"]), (2, ["c", "a", "b"]), (3, ["a", "b", "c"])])
def test_schedule_rotates_the_order_every_round(round_index: int, expected: list[str]) -> None:
    pairs = [(name, "greedy") for name in "abc"]
    assert [s for s, _ in schedule(pairs, round_index)] == expected


@pytest.mark.parametrize(("modules", "batch", "expected"), [
    (8, 32, [i // 4 for i in range(32)]),
    (2, 4, [0, 0, 1, 1]),
    (8, 4, [0, 1, 2, 3]),
    (3, 7, [0, 0, 1, 1, 2, 2, 2]),
])
def test_mixed_members_are_contiguous_blocks(modules: int, batch: int,
                                             expected: list[int]) -> None:
    ids = [f"m{i}" for i in range(modules)]
    assert mixed_members(ids, batch=batch) == [Member(f"m{i}") for i in expected]


def test_random_adapter_has_no_zero_tensor() -> None:
    config, params = random_adapter(tiny_config(), bottleneck=8, seed=1)
    assert config == {"family": "adapter", "bottleneck": 8}
    assert all(tensor.abs().sum() > 0 for tensor in params.values())


@pytest.mark.parametrize("family", ["sf", "pa", "mixing"])
def test_random_override_is_near_but_not_the_backbone(family: str) -> None:
    engine = build_engine(tiny_backbone_files())
    options = family_options(family, TINY)
    config, params = random_override(engine, family, seed=3, **options)
    chosen = get_family(family)
    assert config == chosen.normalise({"family": family, **options})
    fresh = chosen.initial(engine.config, config, torch.Generator(),
                           weights=engine.model.state_dict())
    assert params.keys() == fresh.keys()
    for name, tensor in params.items():
        change = (tensor - fresh[name]).abs().max().item()
        assert (change == 0.0) if name == "epsilon" else (0.0 < change < 0.1), name
    engine.register_module("m", config, params)  # the shapes fit the engine's backbone


def test_mixing_line_has_the_configured_domains() -> None:
    options = family_options("mixing", TINY)
    assert len(options["domains"]) == TINY.mixing_domains == 8
    assert options["sides"] == "encoder"
    assert family_options("sf", TINY) == family_options("pa", TINY) == {}
    low_rank = system_options("engine-float32-mixing-lowrank", TINY)
    assert low_rank == options | {"rank": TINY.mixing_rank}
    assert system_options("engine-float32-mixing", TINY) == options


def rows_with(speeds: dict[str, float], decode: str = "greedy") -> list[Row]:
    return [Row(system, decode, value, 1.0, 1, 32, 25, 800) for system, value in speeds.items()]


BASE_SPEEDS = {"hf": 500.0, "ct2-float32": 1000.0, "ct2-int8": 2000.0,
               "engine-float32": 1000.0, "engine-int8": 1400.0,
               "engine-float32-adapter": 800.0, "engine-float32-mixed8": 760.0,
               "engine-float32-sf": 600.0, "engine-float32-pa": 500.0,
               "engine-float32-mixing": 400.0, "engine-float32-mixing-lowrank": 500.0,
               "engine-float32-adapter-int8": 800.0, "engine-float32-mixed8-int8": 780.0,
               "engine-float32-adapter-bf16": 840.0, "engine-float32-mixed8-bf16": 800.0}


@pytest.mark.parametrize(("changes", "label", "expected_ratio", "expected_met"), [
    ({}, "engine float32 / CT2 float32", 1.0, True),
    ({"engine-float32": 990.0}, "engine float32 / CT2 float32", 0.99, False),
    ({}, "engine int8 / CT2 int8", 0.7, True),
    ({"engine-int8": 1398.0}, "engine int8 / CT2 int8", 0.699, False),
    ({}, "one adapter / backbone only", 0.8, True),
    ({"engine-float32-adapter": 700.0}, "one adapter / backbone only", 0.7, False),
    ({}, "8 mixed adapters / one adapter", 0.95, True),
    ({"engine-float32-mixed8": 750.0}, "8 mixed adapters / one adapter", 0.9375, False),
    ({}, "engine float32 / HF generate", 2.0, None),
    ({"ct2-int8": 0.0}, "engine int8 / CT2 int8", None, None),
    ({}, "sf module / one adapter", 0.75, None),
    ({}, "sf module / backbone only", 0.6, None),
    ({}, "pa module / one adapter", 0.625, None),
    ({}, "pa module / backbone only", 0.5, None),
    ({}, "mixing module / one adapter", 0.5, None),
    ({}, "mixing module / backbone only", 0.4, None),
    ({}, "mixing-lowrank module / backbone only", 0.5, True),
    ({"engine-float32-mixing-lowrank": 490.0}, "mixing-lowrank module / backbone only", 0.49,
     False),
    ({}, "mixing-lowrank module / one adapter", 0.625, None),
    ({}, "8 mixed int8 adapters / one int8 adapter", 0.975, True),
    ({"engine-float32-mixed8-int8": 740.0}, "8 mixed int8 adapters / one int8 adapter", 0.925,
     False),
    ({}, "one int8 adapter / one adapter", 1.0, None),
    ({}, "8 mixed int8 adapters / one adapter", 0.975, None),
    ({}, "8 mixed grouped bf16 adapters / one grouped bf16 adapter", 800 / 840, True),
    ({"engine-float32-mixed8-bf16": 790.0},
     "8 mixed grouped bf16 adapters / one grouped bf16 adapter", 790 / 840, False),
    ({}, "8 mixed grouped bf16 adapters / one adapter", 1.0, True),
    ({}, "one grouped bf16 adapter / one adapter", 1.05, None),
    ({"engine-bfloat16": 1250.0}, "engine bfloat16 / CT2 float32 (#51)", 1.25, True),
    ({"engine-bfloat16": 1100.0}, "engine bfloat16 / CT2 float32 (#51)", 1.1, False),
    ({"engine-bfloat16": 1500.0}, "engine bfloat16 / engine float32", 1.5, None),
    ({}, "engine bfloat16 / CT2 float32 (#51)", None, None),  # no bfloat16 row on this host
])
def test_target_checks(changes: dict[str, float], label: str, expected_ratio: float | None,
                       expected_met: bool | None) -> None:
    checks = {c.target.label: c for c in check_targets(rows_with(BASE_SPEEDS | changes))}
    assert set(checks) == {t.label for t in TARGETS if t.decode in (None, "greedy")}
    check = checks[label]
    if expected_ratio is None:
        assert check.ratio is None
    else:
        assert check.ratio == pytest.approx(expected_ratio)
    assert check.met is expected_met


def test_missing_system_gives_no_ratio_and_no_verdict() -> None:
    rows = rows_with({"engine-float32": 100.0})
    assert ratio(rows, "engine-float32", "ct2-float32", "greedy") is None
    assert ratio(rows, "engine-float32", "engine-float32", "beam4") is None
    target = Target("x", "engine-float32", "ct2-float32", 1.0)
    assert [(c.ratio, c.met) for c in check_targets(rows, [target])] == [(None, None)]


def test_targets_are_checked_per_decode() -> None:
    rows = rows_with(BASE_SPEEDS) + rows_with(BASE_SPEEDS | {"engine-float32": 500.0}, "beam4")
    verdicts = {(c.target.label, c.decode): c.met for c in check_targets(rows)}
    assert verdicts[("engine float32 / CT2 float32", "greedy")] is True
    assert verdicts[("engine float32 / CT2 float32", "beam4")] is False
    # Issue #23's beam targets are checked on beam4 only.
    assert ("engine float32 / CT2 float32, beam (#23)", "greedy") not in verdicts
    assert verdicts[("engine int8 / CT2 int8, beam (#23)", "beam4")] is False  # 1400 / 2000


def test_beam_targets_of_issue_23() -> None:
    speeds = BASE_SPEEDS | {"engine-float32": 1200.0, "engine-int8": 2990.0}
    checks = {c.target.label: c for c in check_targets(rows_with(speeds, "beam4"))}
    assert checks["engine float32 / CT2 float32, beam (#23)"].met is True  # 1.20x
    assert checks["engine int8 / CT2 int8, beam (#23)"].met is False  # 1.495x < 1.5x


def test_markdown_shows_speeds_ratios_and_verdicts() -> None:
    rows = rows_with(BASE_SPEEDS | {"engine-float32-mixed8": 700.0})
    text = markdown(rows, check_targets(rows), {"mode": "quick", "description": "toy"})
    assert "| engine-float32 | 1,000 |" in text
    assert "| engine float32 / CT2 float32 | greedy | 1.00x | n/a | >= 1.00x | met |" in text
    assert ("| 8 mixed adapters / one adapter | greedy | 0.88x | n/a | >= 0.95x | **missed** |"
            in text)
    assert "| engine float32 / HF generate | greedy | 2.00x | n/a |  | (no target) |" in text
    assert "| engine-float32-mixing | 400 |" in text
    assert "| pa module / one adapter | greedy | 0.62x | n/a |  | (no target) |" in text
    assert "| mixing module / backbone only | greedy | 0.40x | n/a |  | (no target) |" in text
    assert "Targets met: 7 of 8; missed: 8 mixed adapters / one adapter (greedy)." in text


def test_write_results_files(tmp_path: Path) -> None:
    rows = rows_with(BASE_SPEEDS)
    paths = write_results(rows, {"mode": "tiny", "machine": {"cpu_count": 2}}, tmp_path)
    assert [p.name for p in paths] == ["engine_speed.json", "engine_speed.meta.json",
                                       "engine_speed.md"]
    assert json.loads(paths[0].read_text()) == [row.to_dict() for row in rows]
    meta = json.loads(paths[1].read_text())
    assert meta["machine"] == {"cpu_count": 2} and len(meta["targets"]) == len(
        [t for t in TARGETS if t.decode in (None, "greedy")])
    report = paths[2].read_text().splitlines()
    assert report[0] == "# Engine speed (tiny run)"
    made = MADE_BY.match(report[2])  # how it was made, under the title
    assert made is not None and "CPUs" in made["host"]  # the host's CPU, named
