"""The GPU serving benchmark's own steps, rehearsed on the CPU with a tiny store: the
CTranslate2 ceiling on the server's sentences and batches, and an admin upload + activate
while clients keep sending (nothing here asserts on speed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.speed.gpu.serve_gpu import TINY, Ceiling, Flip, ct2_ceiling, flip_under_load, report
from benchmarks.speed.serve.config import ServeConfig
from benchmarks.speed.serve.loadstats import OfflineStats
from benchmarks.speed.serve.serve_load import Served
from benchmarks.speed.serve.store import StoreSpec, seed_tiny_store
from model_store import Store

CONFIG = ServeConfig(beam_size=2)
SETS = {"medical": ["The patient takes one tablet a day.", "Keep it dry. Do not freeze."],
        "law": ["Member states shall comply with this directive."]}


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> StoreSpec:
    return seed_tiny_store(tmp_path_factory.mktemp("serve-gpu") / "store")


@pytest.mark.slow
def test_the_ceiling_translates_every_sentence_of_the_texts(tiny_store: StoreSpec,
                                                             tmp_path: Path) -> None:
    texts = SETS["medical"] + SETS["law"]
    ceiling = ct2_ceiling(tiny_store, texts, CONFIG, device="cpu", compute_type="float32",
                          scratch=tmp_path)
    assert ceiling.sentences == 4  # "Keep it dry." and "Do not freeze." apart
    assert ceiling.target_tokens >= ceiling.sentences and ceiling.seconds > 0


@pytest.mark.slow
def test_a_module_flipped_under_load_is_served_with_no_failed_request(
        tiny_store: StoreSpec, tmp_path: Path) -> None:
    with tiny_store.open() as store:
        before = store.active_domains()
    plan = replace(TINY, levels=(2,), round_requests=12, max_seconds=60.0)
    flip = flip_under_load(tiny_store, SETS, plan, CONFIG, log=tmp_path / "server.log",
                           seed=0)
    assert flip is not None
    assert (flip.upload_status, flip.activate_status) == (201, 200)
    assert flip.requests > 0 and flip.failed == 0  # rounds went on until both answered
    with Store.open(tiny_store.root, builtin_dir=None) as store:
        after = store.active_domains()
    assert after[flip.domain] == before[flip.domain] + 1  # the uploaded copy is served
    assert {d: v for d, v in after.items() if d != flip.domain} == \
        {d: v for d, v in before.items() if d != flip.domain}


def test_the_report_names_the_ceiling_and_the_flip() -> None:
    offline = OfflineStats(sentences=10, target_tokens=400, batches=2, seconds=0.5,
                           sentences_per_s=20.0, tokens_per_s=800.0)
    result = Served(requests=[], domains=[], levels=[], offline=offline, pairs=[])
    text = report(result, Ceiling("float16", 10, 500, 0.5),
                  Flip("law", 201, 200, 0.2, 0.4, 120, 0),
                  {"beam_size": 4, "mode": "gpu", "description": ""})
    assert "CTranslate2 float16, beam 4: 10 sentences, 1,000 target tokens/s; the engine " \
        "offline 800 tokens/s (0.80x of it" in text
    assert "`law`: upload 201 in 0.20 s, activate 200 in 0.40 s" in text
    assert "120 requests were served with 0 failures" in text


def test_the_carried_packages_are_the_runtime_pins_the_gpu_image_lacks() -> None:
    from benchmarks.speed.gpu.gpu_wheels import PRESENT, normalise, runtime_requirements

    pins = runtime_requirements()
    names = {normalise(pin.split("==")[0]) for pin in pins}
    assert {"fastapi", "uvicorn", "pydantic", "sqlalchemy", "fasttext-community"} <= names
    assert not names & PRESENT and "torch" not in names
    assert all("==" in pin for pin in pins)  # exact pins, as pyproject.toml states them
