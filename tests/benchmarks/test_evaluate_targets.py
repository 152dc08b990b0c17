"""The targets block and the summary are computed from the numbers: table-driven checks on
made-up tables."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.quality.evaluation.targets import (
    FORGETTING_DROP,
    Target,
    check_targets,
    forgetting_effect,
    mean_over,
    summary,
)

DOMAINS = ("it", "law", "medical", "religion")
GENRES = ("news", "captions")
GOOD_ACCURACY = {"it": 0.95, "law": 0.99, "medical": 0.97, "religion": 1.0}


def known(generic: float, adapters: dict[str, float] | float, *, auto: float,
          soft: float) -> dict[str, dict[str, float]]:
    per_domain = adapters if isinstance(adapters, dict) else dict.fromkeys(DOMAINS, adapters)
    return {"generic": dict.fromkeys(DOMAINS, generic), "adapter-true": per_domain,
            "auto": dict.fromkeys(DOMAINS, auto), "ensemble-soft": dict.fromkeys(DOMAINS, soft)}


def open_domain(generic: float, soft: dict[str, float]) -> dict[str, dict[str, float]]:
    return {"generic": dict.fromkeys(GENRES, generic), "ensemble-soft": soft}


def status(targets: list[Target]) -> dict[str, bool | None]:
    return {t.name: t.met for t in targets}


ALL_MET: dict[str, bool | None] = {
    "adapters-average": True, "adapters-every-domain": True, "routing-loss": True,
    "classifier-accuracy": True, "soft-open-domain": True, "soft-known-domains": True}

CASES: list[tuple[str, dict[str, Any], dict[str, bool | None]]] = [
    ("everything met",
     {"known": known(30.0, 33.0, auto=32.6, soft=32.1),
      "open": open_domain(20.0, {"news": 20.0, "captions": 21.0})}, ALL_MET),
    ("gain of exactly 2 BLEU is enough",
     {"known": known(30.0, 32.0, auto=32.0, soft=32.0),
      "open": open_domain(20.0, {"news": 20.5, "captions": 21.0})}, ALL_MET),
    ("average gain too small",
     {"known": known(30.0, 31.5, auto=31.5, soft=31.5),
      "open": open_domain(20.0, {"news": 20.5, "captions": 21.0})},
     ALL_MET | {"adapters-average": False}),
    ("one domain does not improve",
     {"known": known(30.0, {"it": 30.0, "law": 36.0, "medical": 36.0, "religion": 36.0},
                     auto=34.0, soft=34.0),
      "open": open_domain(20.0, {"news": 20.5, "captions": 21.0})},
     ALL_MET | {"adapters-every-domain": False}),  # routing loses exactly 0.5: met
    ("routing loses 0.6 BLEU, soft 1.2 BLEU",
     {"known": known(30.0, 33.0, auto=32.4, soft=31.8),
      "open": open_domain(20.0, {"news": 20.5, "captions": 21.0})},
     ALL_MET | {"routing-loss": False, "soft-known-domains": False}),
    ("soft ensemble below generic on one genre",
     {"known": known(30.0, 33.0, auto=33.0, soft=33.0),
      "open": open_domain(20.0, {"news": 19.9, "captions": 21.0})},
     ALL_MET | {"soft-open-domain": False}),
    ("classifier below 90% on law",
     {"known": known(30.0, 33.0, auto=33.0, soft=33.0),
      "open": open_domain(20.0, {"news": 20.0, "captions": 21.0}),
      "accuracy": GOOD_ACCURACY | {"law": 0.89}},
     ALL_MET | {"classifier-accuracy": False}),
    ("missing numbers are not evaluated, never met",
     {"known": {"generic": dict.fromkeys(DOMAINS, 30.0),
                "adapter-true": dict.fromkeys(DOMAINS, 33.0)},
      "open": {}, "accuracy": {"it": 1.0}},
     {"adapters-average": True, "adapters-every-domain": True, "routing-loss": None,
      "classifier-accuracy": None, "soft-open-domain": None, "soft-known-domains": None}),
]


@pytest.mark.parametrize(("name", "numbers", "expected"), CASES, ids=[c[0] for c in CASES])
def test_check_targets(name: str, numbers: dict[str, Any],
                       expected: dict[str, bool | None]) -> None:
    targets = check_targets(numbers["known"], numbers["open"],
                            numbers.get("accuracy", GOOD_ACCURACY), domains=DOMAINS,
                            genres=GENRES)
    assert status(targets) == expected


def test_target_values_show_the_numbers() -> None:
    targets = check_targets(known(30.0, 33.0, auto=32.6, soft=32.1),
                            open_domain(20.0, {"news": 19.0, "captions": 21.0}),
                            GOOD_ACCURACY, domains=DOMAINS, genres=GENRES)
    values = {t.name: t.value for t in targets}
    assert values["adapters-average"] == "+3.00 BLEU (33.00 vs 30.00)"
    assert values["routing-loss"] == "+0.40 BLEU (33.00 vs 32.60)"
    assert values["soft-open-domain"] == "worst margin -1.00 BLEU; fails on news"
    assert "law 99.0%" in values["classifier-accuracy"]


@pytest.mark.parametrize(("row", "sets", "expected"), [
    ({"a": 1.0, "b": 3.0}, ("a", "b"), 2.0),
    ({"a": 1.0}, ("a", "b"), None),
    ({}, (), None),
])
def test_mean_over(row: dict[str, float], sets: tuple[str, ...], expected: float | None) -> None:
    assert mean_over({"s": row}, "s", sets) == expected


def test_summary_is_generated_from_the_numbers() -> None:
    table = known(30.0, 33.0, auto=32.6, soft=32.1)
    targets = check_targets(table, open_domain(20.0, {"news": 19.0, "captions": 21.0}),
                            GOOD_ACCURACY, domains=DOMAINS, genres=GENRES)
    finetuning = {"medical": {"in_domain": 40.0, "adapter": 36.0, "generic": 30.0,
                              "forgetting": -4.5}}
    text = summary(table, open_domain(20.0, {"news": 19.0, "captions": 21.0}), finetuning,
                   targets, domains=DOMAINS, genres=GENRES)
    assert "+3.00 over the generic backbone (33.00 vs 30.00) and win on 4 of 4" in text
    assert "automatic routing 32.60 (-0.40 / +2.60); soft ensemble 32.10" in text
    assert "changes the other domains' average by -4.50 BLEU" in text
    assert "catastrophic forgetting" in text
    assert "5 of 6 targets are met; not met: soft-open-domain." in text


@pytest.mark.parametrize(("change", "expected"), [
    (-4.5, "catastrophic forgetting"),
    (-FORGETTING_DROP, "catastrophic forgetting"),
    (-0.49, "within noise"),
    (-0.01, "within noise"),
    (0.0, "within noise"),
    (0.3, "within noise"),
    (0.5, "no forgetting at this budget"),
    (1.2, "no forgetting at this budget"),
])
def test_forgetting_needs_a_real_drop(change: float, expected: str) -> None:
    assert FORGETTING_DROP == 0.5
    assert forgetting_effect(change).startswith(expected)


def test_summary_does_not_call_a_tiny_drop_forgetting() -> None:
    table = known(30.0, 33.0, auto=32.6, soft=32.1)
    finetuning = {"law": {"in_domain": 38.0, "adapter": 35.0, "generic": 30.0,
                          "forgetting": -0.01}}
    text = summary(table, {}, finetuning, [], domains=DOMAINS, genres=GENRES)
    assert "changes the other domains' average by -0.01 BLEU" in text
    assert "within noise" in text and "forgetting," not in text
    assert "catastrophic" not in text


def test_summary_mentions_the_mixing_rows() -> None:
    table = known(30.0, 33.0, auto=32.6, soft=32.1) | {"mixing": dict.fromkeys(DOMAINS, 31.0)}
    open_table = open_domain(20.0, {"news": 20.0, "captions": 21.0}) | {
        "mixing": {"news": 21.0, "captions": 22.0}}
    text = summary(table, open_table, {}, [], domains=DOMAINS, genres=GENRES)
    assert "word-level mixing (no label) 31.00 (-2.00 / +1.00)" in text
    assert "word-level mixing 21.50 (+1.50)" in text
