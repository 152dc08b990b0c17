"""Fixed-shape decoding steps (server/engine/fixed_steps.py: what a CUDA graph replays)
against ordinary decoding: the same log-probabilities under beam-style reorders and
finishing sentences, the same translations for every module family, and, on CUDA, a
captured graph that replays the eager arithmetic."""

from __future__ import annotations

import pytest
import torch

from server.decoding.search import SearchOptions
from server.engine.backbone import Backbone
from server.engine.engine import EngineOptions, SentenceJob
from server.engine.fixed_steps import FixedStepper
from tests.engine.test_decoder_cache import sources, teacher_forced
from tests.engine.test_device_agreement import MEMBERS, SOURCES, engine_with, modules
from tests.tiny import random_backbone, tiny_config

STEPS = 9


def fixed_stepper(model: Backbone, src: torch.Tensor, *, beam: int,
                  capture: bool = False) -> FixedStepper:
    memory, mask = model.encode(src)
    return FixedStepper(model, model.logits, model.start_state(memory, mask),
                        keys=[(None, -1)] * src.shape[0], beam=beam, capacity=STEPS,
                        capture=capture)


@pytest.mark.parametrize("overrides", [{}, {"normalize_before": True}])
def test_steps_follow_reorders_and_finished_sentences(overrides: dict[str, object]) -> None:
    """Each search row continues its own history: beams duplicated and reordered inside
    their sentence, then a sentence dropped, as beam search does."""
    model = random_backbone(tiny_config(**overrides), seed=7).eval()
    src = sources(model)  # 3 sentences, one padded
    beam = 3
    generator = torch.Generator().manual_seed(4)
    with torch.inference_mode():
        stepper = fixed_stepper(model, src, beam=beam)
        origin = torch.arange(src.shape[0])  # the search's rows: their sentence
        history = torch.randint(4, model.config.tgt_vocab_size, (src.shape[0], STEPS),
                                generator=generator)
        for step in range(STEPS):
            got = stepper.step(history[:, step])
            expected = torch.log_softmax(teacher_forced(
                model, src.index_select(0, origin), history[:, : step + 1])[:, -1], dim=-1)
            torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
            if step == 0:  # expand: every sentence's one row becomes `beam` rows
                index = torch.arange(src.shape[0]).repeat_interleave(beam)
            elif step == 5:  # sentence 1 finishes: its rows leave the search
                index = torch.tensor([r for r in range(len(origin)) if origin[r] != 1])
            else:  # each row takes a random parent among its sentence's rows
                index = torch.tensor([
                    int(torch.nonzero(origin == origin[r]).flatten()[
                        torch.randint(0, beam, (1,), generator=generator)])
                    for r in range(len(origin))])
            stepper.reorder(index)
            origin = origin.index_select(0, index)
            fresh = torch.randint(4, model.config.tgt_vocab_size, (len(index), STEPS),
                                  generator=generator)
            fresh[:, : step + 1] = history.index_select(0, index)[:, : step + 1]
            history = fresh


def test_a_sentence_cannot_take_more_rows_than_its_beams() -> None:
    model = random_backbone(tiny_config(), seed=8).eval()
    with torch.inference_mode():
        stepper = fixed_stepper(model, sources(model), beam=2)
        stepper.step(torch.full((3,), 4))
        with pytest.raises(ValueError, match="more than 2 rows for sentence 0"):
            stepper.reorder(torch.tensor([0, 0, 0]))


@pytest.mark.parametrize("search", [SearchOptions(beam_size=1),
                                    SearchOptions(beam_size=3, n_best=3),
                                    SearchOptions(beam_size=4)],
                         ids=["greedy", "beam3-nbest3", "beam4"])
def test_translations_equal_ordinary_decoding(search: SearchOptions) -> None:
    """Every family (one member per sentence, so every batch runs fixed steps) and the
    ensembles (which keep ordinary decoding) translate as they do without fixed steps,
    sentences of several lengths and length limits."""
    made = modules()
    engines = [engine_with(EngineOptions(fixed_steps=fixed), made) for fixed in (False, True)]
    for members in ([m for m in MEMBERS if len(m) == 1], MEMBERS):
        jobs = [SentenceJob(SOURCES[row % len(SOURCES)], chosen, 6 + row % 5)
                for row, chosen in enumerate(members)]
        ordinary, fixed = (engine.translate(jobs, search) for engine in engines)
        for want, got in zip(ordinary, fixed, strict=True):
            assert [h.tokens for h in got] == [h.tokens for h in want]
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)


@pytest.mark.gpu
def test_the_captured_graph_replays_the_eager_steps() -> None:
    model = random_backbone(tiny_config(), seed=9).eval().cuda()
    src = sources(model).cuda()
    tokens = torch.randint(4, model.config.tgt_vocab_size, (src.shape[0] * 2, STEPS),
                           generator=torch.Generator().manual_seed(5)).cuda()
    with torch.inference_mode():
        eager = fixed_stepper(model, src, beam=2)
        graphed = fixed_stepper(model, src, beam=2, capture=True)
        expand = torch.arange(src.shape[0], device="cuda").repeat_interleave(2)
        for stepper in (eager, graphed):
            stepper.step(tokens[: src.shape[0], 0])
            stepper.reorder(expand)
        for step in range(1, STEPS):
            torch.testing.assert_close(graphed.step(tokens[:, step]),
                                       eager.step(tokens[:, step]), atol=1e-5, rtol=1e-5)
            swap = torch.tensor([1, 0, 2, 2, 5, 4], device="cuda")  # inside each sentence
            eager.reorder(swap)
            graphed.reorder(swap)
    assert graphed.graph is not None and eager.graph is None


def test_single_member_batches_take_fixed_steps_and_ensembles_do_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[FixedStepper] = []

    class Counted(FixedStepper):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            built.append(self)

    monkeypatch.setattr("server.engine.engine.FixedStepper", Counted)
    made = modules()
    engine = engine_with(EngineOptions(fixed_steps=True), made)
    singles = [m for m in MEMBERS if len(m) == 1]
    engine.translate([SentenceJob(SOURCES[0], members, 6) for members in singles],
                     SearchOptions(beam_size=2))
    assert len(built) == 1 and built[0].beam == 2 and built[0].steps > 0
    assert not built[0].capture  # no CUDA here: eager steps on the fixed buffers
    engine.translate([SentenceJob(SOURCES[0], members, 6) for members in MEMBERS],
                     SearchOptions(beam_size=2))
    assert len(built) == 1  # a batch with an ensemble keeps ordinary steps
    engine_with(EngineOptions(), made).translate(
        [SentenceJob(SOURCES[0], singles[0], 6)], SearchOptions())
    assert len(built) == 1  # off on CPU by default
