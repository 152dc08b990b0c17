"""Pure functions of job inputs: the uploaded TSV and the job configuration."""

from __future__ import annotations

from typing import Any

import pytest

from contract.training import JobConfigError, normalise_config
from contract.tsv import DataError, hold_out, pairs_from_bytes, pairs_to_bytes, parse_pairs
from tests.tiny import tiny_config


@pytest.mark.parametrize(("data", "pairs"), [
    (b"a b\tc d\n", [("a b", "c d")]),
    (b"a\tb\r\nc\td", [("a", "b"), ("c", "d")]),  # CRLF, no final newline
    (b"\xef\xbb\xbfa\tb\n\n  \nc\td\n", [("a", "b"), ("c", "d")]),  # BOM, blank lines
    ("é ü\tà\n".encode(), [("é ü", "à")]),
    (b" a \t b \n", [("a", "b")]),
])
def test_parse_pairs_accepts(data: bytes, pairs: list[tuple[str, str]]) -> None:
    assert parse_pairs(data, label="train") == pairs


@pytest.mark.parametrize(("data", "expected"), [
    (b"", "train: the file is empty"),
    (b"\n \n\t\n", "train: the file is empty"),  # whitespace only
    (b"a\tb\nno tab here\nc\td\n", "train: 1 misaligned line(s) (line 2)"),
    (b"a\tb\tc\n", "train: 1 misaligned line(s) (line 1)"),
    (b"a\t \n", "train: 1 misaligned line(s) (line 1)"),
    (b"".join(b"x\n" for _ in range(7)), "7 misaligned line(s) (line 1, 2, 3, 4, 5, ...)"),
    (b"a\tb\ncaf\xe9\tx\n", "train: not valid UTF-8 (byte 0xe9 at offset 7, line 2)"),
])
def test_parse_pairs_refuses_with_a_clear_reason(data: bytes, expected: str) -> None:
    with pytest.raises(DataError) as caught:
        parse_pairs(data, label="train")
    assert expected in str(caught.value)


def test_blank_file_is_empty() -> None:
    with pytest.raises(DataError, match="empty"):
        parse_pairs(b"\n  \n\n", label="dev")


def test_canonical_bytes_round_trip() -> None:
    pairs = [("a b", "c"), ("é", "ü ö")]
    assert pairs_from_bytes(pairs_to_bytes(pairs)) == pairs


def test_hold_out_is_deterministic_and_leak_free() -> None:
    pairs = [(f"s{i % 40}", f"t{i}") for i in range(50)]  # 10 duplicated sources
    first = hold_out(pairs, seed=3, fraction=0.1, max_dev=500)
    assert first == hold_out(pairs, seed=3, fraction=0.1, max_dev=500)
    assert first != hold_out(pairs, seed=4, fraction=0.1, max_dev=500)
    train, dev = first
    assert len(dev) == 5
    assert not {s for s, _ in dev} & {s for s, _ in train}
    assert len(hold_out(pairs, seed=3, fraction=0.4, max_dev=2)[1]) == 2


def test_config_defaults_suit_the_backbone() -> None:
    config = normalise_config({}, tiny_config(d_model=32))
    assert config["module"] == {"family": "adapter", "bottleneck": 16}
    assert config["training"]["seed"] == 1
    assert config["training"]["gate_margin_bleu"] == 1.0
    assert normalise_config({"family": "ldr"}, tiny_config())["module"] == {"family": "ldr",
                                                                            "rank": 8}


@pytest.mark.parametrize(("raw", "expected"), [
    ({"family": "lora"}, "unknown module family 'lora'; allowed: adapter, gated, highway, ldr"),
    ({"rank": 4}, "unknown option(s) 'rank' for family 'adapter'; allowed: family, bottleneck"),
    ({"family": "ldr", "bottleneck": 4}, "unknown option(s) 'bottleneck' for family 'ldr'"),
    ({"bottleneck": 0}, "bottleneck must be an integer in [1, 8192]"),
    ({"lr": -1}, "lr: Input should be greater than 0"),
    ({"max_epochs": "3"}, "max_epochs: Input should be a valid integer"),
    ({"patience": True}, "patience: Input should be a valid integer"),
    # every option is bounded above, and NaN / infinity are refused
    ({"max_minutes": 10**9}, "max_minutes: Input should be less than or equal to 1440"),
    ({"max_steps": 10**12}, "max_steps: Input should be less than or equal to 10000000"),
    ({"max_tokens": 10**9}, "max_tokens: Input should be less than or equal to 100000"),
    ({"seed": 2**64}, "seed: Input should be less than or equal to 4294967295"),
    ({"gate_margin_bleu": float("nan")}, "gate_margin_bleu: Input should be a finite number"),
    ({"weight_decay": float("inf")}, "weight_decay: Input should be a finite number"),
])
def test_config_problems_name_what_is_allowed(raw: dict[str, Any], expected: str) -> None:
    with pytest.raises(JobConfigError) as caught:
        normalise_config(raw, tiny_config())
    assert expected in str(caught.value)


def test_config_accepts_integers_for_floats() -> None:
    config = normalise_config({"lr": 1, "max_minutes": 2, "gate_margin_bleu": -100},
                              tiny_config())
    assert config["training"]["lr"] == 1.0
    assert config["training"]["gate_margin_bleu"] == -100.0
