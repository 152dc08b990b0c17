"""Decoding for the evaluation: batch planning, cross-system reuse, the resumable cache,
and the cached full fine-tuning baseline (tiny models)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmarks.quality.data import EvalSet
from benchmarks.quality.decode import GENERIC_MEMBERS, Decoder, DecodeSettings, plan_batches
from benchmarks.quality.evaluation.finetune import FinetuneSettings, finetune
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, Member, SentenceJob
from tests.tiny import ENGLISH, FRENCH, random_module, tiny_backbone_files, tiny_config


def _job(length: int, members: int) -> SentenceJob:
    chosen = tuple(Member(None if i == 0 else f"m{i}", 1.0) for i in range(members))
    return SentenceJob(list(range(4, 4 + length)), chosen, 8)


@pytest.mark.parametrize(("shape", "beam", "batch_size", "max_rows", "expected"), [
    ([(3, 1), (1, 1), (2, 1)], 1, 64, 512, [[1, 2, 0]]),  # sorted by length
    ([(1, 1)] * 5, 1, 2, 512, [[0, 1], [2, 3], [4]]),  # sentence cap
    ([(1, 4)] * 4, 2, 64, 16, [[0, 1], [2, 3]]),  # 4 members x beam 2 = 8 rows each
    ([(1, 1), (2, 8)], 4, 64, 16, [[0], [1]]),  # one sentence wider than max_rows alone
])
def test_plan_batches(shape: list[tuple[int, int]], beam: int, batch_size: int, max_rows: int,
                      expected: list[list[int]]) -> None:
    jobs = [_job(length, members) for length, members in shape]
    assert plan_batches(jobs, beam_size=beam, batch_size=batch_size,
                        max_rows=max_rows) == expected


@pytest.fixture(scope="module")
def engine() -> Engine:
    built = build_engine(tiny_backbone_files())
    config, params = random_module(tiny_config(), "adapter", seed=3, bottleneck=4)
    built.register_module("m", config, params)
    return built


def _dataset(count: int = 6) -> EvalSet:
    return EvalSet("medical", "domain", "test", ENGLISH[:count], FRENCH[:count])


def _decoder(engine: Engine, cache: Path | None, *, fresh: bool = False) -> Decoder:
    return Decoder(engine, label="tiny", settings=DecodeSettings(beam_size=1, batch_size=4),
                   cache_dir=cache, fresh=fresh)


def test_identical_jobs_are_reused_across_systems(engine: Engine) -> None:
    decoder = _decoder(engine, None)
    dataset = _dataset()
    first = decoder.run("generic", dataset, [GENERIC_MEMBERS] * len(dataset))
    assert first.decoded == len(dataset) and first.reused == 0 and not first.cached
    mixed = [(Member("m", 1.0),) if i % 2 else GENERIC_MEMBERS for i in range(len(dataset))]
    second = decoder.run("mixed", dataset, mixed)
    assert second.decoded == len(dataset) // 2 and second.reused == len(dataset) // 2
    assert second.hypotheses[::2] == first.hypotheses[::2]


def test_cache_resumes_and_is_keyed_by_members(engine: Engine, tmp_path: Path) -> None:
    dataset = _dataset()
    members = [(Member("m", 0.5), Member(None, 0.5))] * len(dataset)
    first = _decoder(engine, tmp_path).run("ensemble", dataset, members)
    again = _decoder(engine, tmp_path).run("ensemble", dataset, members)
    assert again.cached and again.hypotheses == first.hypotheses
    assert again.seconds == pytest.approx(first.seconds)
    other = [(Member("m", 0.25), Member(None, 0.75))] * len(dataset)
    changed = _decoder(engine, tmp_path).run("ensemble", dataset, other)
    assert not changed.cached and changed.decoded == len(dataset)
    fresh = _decoder(engine, tmp_path, fresh=True).run("ensemble", dataset, members)
    assert not fresh.cached and fresh.hypotheses == first.hypotheses


def test_member_lists_must_match_the_sentences(engine: Engine) -> None:
    with pytest.raises(ValueError, match="member lists"):
        _decoder(engine, None).run("generic", _dataset(), [GENERIC_MEMBERS])


def test_finetuning_trains_every_parameter_and_is_reused(tmp_path: Path) -> None:
    files = tiny_backbone_files()
    pairs = list(zip(ENGLISH, FRENCH, strict=True))
    settings = FinetuneSettings(minutes=1.0, max_steps=3, lr=1e-2, warmup_steps=1)
    tuned = finetune(files, pairs, domain="medical", fingerprint="f" * 64,
                     settings=settings, run_root=tmp_path)
    assert tuned.info["steps"] == 3 and tuned.info["stop_reason"] == "max_steps"
    original = build_engine(files).model.state_dict()
    changed = [k for k, v in tuned.engine.model.state_dict().items()
               if not torch.equal(v, original[k])]
    assert len(changed) > len(original) // 2  # all weights move (norm gains may not)
    again = finetune(files, pairs, domain="medical", fingerprint="f" * 64,
                     settings=settings, run_root=tmp_path)
    assert again.info == tuned.info and again.label == tuned.label
    for key, value in again.engine.model.state_dict().items():
        assert torch.equal(value, tuned.engine.model.state_dict()[key])
