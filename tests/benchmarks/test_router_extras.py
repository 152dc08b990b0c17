"""benchmarks/quality/router/router_extras.py on a tiny corpus: every domain's text carries its
own words, so a router trained on it must tell them apart."""

from __future__ import annotations

from pathlib import Path

from benchmarks.quality.router.router import TARGET_DOMAINS
from benchmarks.quality.router.router_extras import markdown, score_candidate
from trainer.recipes.default_en_fr import DOMAINS
from trainer.recipes.router_stage import (
    GENERIC_GENRES,
    GENERIC_HELD_OUT,
    GENERIC_TRAIN,
    ROUTER_SETTINGS,
)


def write(directory: Path, split: str, lines: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{split}.en").write_text("".join(f"{line}\n" for line in lines))
    (directory / f"{split}.fr").write_text("".join(f"ligne {i}\n" for i in range(len(lines))))


def build_data(root: Path) -> Path:
    for domain in DOMAINS:
        words = f"{domain}word {domain}thing"
        folder = root / "en-fr" / "domains" / domain
        write(folder, "train", [f"{words} train {i}" for i in range(40)])
        write(folder, "dev", [f"{words} dev {i}" for i in range(5)])
        write(folder, "test", [f"{words} test {i}" for i in range(5)])
    per_genre = GENERIC_TRAIN // len(GENERIC_GENRES) + GENERIC_HELD_OUT  # what it draws
    for genre in GENERIC_GENRES:
        write(root / "en-fr" / "extra" / genre, "train",
              [f"openword {genre} line {i}" for i in range(per_genre)])
    write(root / "en-fr" / "extra" / "biomedical", "train",
          [f"medicalword abstract {i}" for i in range(2000)])
    return root


def test_a_candidate_is_scored_per_class_on_choice_and_test(tmp_path: Path) -> None:
    data = build_data(tmp_path)
    row = score_candidate(data, {"medical": ("biomedical", 2000)}, ROUTER_SETTINGS,
                          held_out=10)
    assert set(row["choice"]) == {*DOMAINS, "generic"} and set(row["test"]) == set(DOMAINS)
    assert row["choice_lowest_target"] == min(row["choice"][d] for d in TARGET_DOMAINS)
    assert row["test_lowest_target"] >= 80.0  # words unique to each domain: easy to tell
    table = markdown([{"name": "medical + 2,000 biomedical", "seed": 1, **row}], held_out=10)
    assert "| medical + 2,000 biomedical | 1 | " in table
    assert "the last 10 train lines of each domain" in table
