"""The default model's router stage (trainer/recipes/router_stage.py), without the shared
corpora: the "generic" class's examples, the domains' extra and sister-pair examples, and
the fastText settings the sidecar retrains routers with."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from server.routing.features import HashedFeatures
from trainer.jobs.settings import SidecarSettings
from trainer.recipes.router_stage import (
    GENERIC_GENRES,
    GENERIC_LABEL,
    ROUTER_SETTINGS,
    domain_extra_examples,
    generic_examples,
    sister_pair_examples,
)
from trainer.routers.classifier import ClassifierSettings
from trainer.routers.settings import RouterSettings


def write_genres(data: Path, lines: int) -> None:
    for genre in GENERIC_GENRES:
        folder = data / "en-fr" / "extra" / genre
        folder.mkdir(parents=True)
        (folder / "train.en").write_text("".join(f"{genre} line {i}\n" for i in range(lines)))


def test_generic_examples_draw_train_from_the_body_and_dev_from_the_tail(
        tmp_path: Path) -> None:
    write_genres(tmp_path, lines=20)
    train_examples, dev_examples = generic_examples(tmp_path, train=9, dev=2, held_out=5)
    assert len(train_examples) == 9 and len(dev_examples) == 6
    assert {label for label, _ in train_examples + dev_examples} == {GENERIC_LABEL}
    assert ("generic", "news line 19") in dev_examples
    # training lines come from lines 0-14 (the last 5 are held out), drawn across them
    numbers = [int(text.rsplit(" ", 1)[1]) for _, text in train_examples]
    news = sorted(int(text.rsplit(" ", 1)[1]) for _, text in train_examples
                  if text.startswith("news"))
    assert max(numbers) < 15 and len(news) == 3 and news != [0, 1, 2]
    assert not {text for _, text in train_examples} & {text for _, text in dev_examples}
    assert generic_examples(tmp_path, train=9, dev=2, held_out=5)[0] == train_examples


def test_generic_examples_skip_repeated_lines(tmp_path: Path) -> None:
    write_genres(tmp_path, lines=8)
    news = tmp_path / "en-fr" / "extra" / "news" / "train.en"
    news.write_text("same\n" * 6 + "tail a\ntail b\n")
    with pytest.raises(ValueError, match="1 distinct lines before the held-out 2, need 3"):
        generic_examples(tmp_path, train=9, dev=2, held_out=2)


def test_generic_examples_refuse_a_genre_that_is_too_small(tmp_path: Path) -> None:
    write_genres(tmp_path, lines=4)
    with pytest.raises(ValueError, match="need 3"):
        generic_examples(tmp_path, train=9, dev=2, held_out=2)


def test_domain_extra_examples_label_distinct_seeded_lines_of_the_paired_genre(
        tmp_path: Path) -> None:
    folder = tmp_path / "en-fr" / "extra" / "biomedical"
    folder.mkdir(parents=True)
    (folder / "train.en").write_text("".join(f"abstract {i % 12}\n" for i in range(30)) + "\n")
    extras = {"medical": ("biomedical", 5), "law": ("parliament", 3)}
    drawn = domain_extra_examples(tmp_path, ("medical", "it"), extras)  # law: not a domain here
    assert len(drawn) == 5 and {label for label, _ in drawn} == {"medical"}
    assert len({text for _, text in drawn}) == 5
    assert [text for _, text in drawn] != [f"abstract {i}" for i in range(5)]  # drawn, not the head
    assert domain_extra_examples(tmp_path, ("medical",), extras) == drawn
    with pytest.raises(ValueError, match="12 distinct lines, need 13"):
        domain_extra_examples(tmp_path, ("medical",), {"medical": ("biomedical", 13)})


def test_the_sidecar_retrains_routers_with_the_recipes_settings() -> None:
    # A router retrained when a domain is added must be trained as the shipped one was.
    assert RouterSettings().classifier_settings() == ROUTER_SETTINGS
    assert ClassifierSettings() == ROUTER_SETTINGS


def test_the_router_settings_row_of_the_api_docs_shows_the_defaults() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "API.md").read_text()
    row = next(line for line in docs.splitlines()
               if line.startswith("| `NMT_TRAINER__ROUTER__EPOCH`"))
    names_cell, _, defaults_cell = (cell.strip() for cell in row.strip("|").split("|")[:3])
    names = [name.strip("`_").lower() for name in names_cell.split(", ")]
    names[0] = names[0].removeprefix("nmt_trainer__router__")
    defaults = [value.strip("`") for value in defaults_cell.split(", ")]
    settings = RouterSettings()
    shown = {name: str(getattr(settings, name)).lower() for name in names}
    assert dict(zip(names, defaults, strict=True)) == shown


def test_router_settings_follow_the_environment_within_bounds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMT_TRAINER__ROUTER__WORD_NGRAMS", "1")
    monkeypatch.setenv("NMT_TRAINER__ROUTER__BUCKET", "1000")
    monkeypatch.setenv("NMT_TRAINER__ROUTER__MIN_EXAMPLES", "3")
    router = SidecarSettings().trainer.router.classifier_settings()
    assert (router.word_ngrams, router.bucket, router.min_examples) == (1, 1000, 3)
    assert router.features() == HashedFeatures(ngrams=1, buckets=1000)
    assert router.epoch == ROUTER_SETTINGS.epoch
    for invalid in ({"word_ngrams": 0}, {"bucket": 1}, {"min_examples": 0}):
        with pytest.raises(ValidationError):
            RouterSettings(**invalid)


def test_sister_pair_examples_add_distinct_english_lines_but_never_en_fr_dev_or_test(
        tmp_path: Path) -> None:
    def write(path: Path, lines: list[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{line}\n" for line in lines))

    write(tmp_path / "en-fr" / "domains" / "medical" / "test.en", ["Take one tablet."])
    write(tmp_path / "en-fr" / "domains" / "law" / "dev.en", ["Article 3"])
    write(tmp_path / "en-de" / "domains" / "medical" / "train.en",
          ["Store below 25 C.", "Take one tablet.", "Article 3", "Store below 25 C.", " "])
    write(tmp_path / "en-de" / "domains" / "law" / "train.en", ["Annex II"])
    drawn = sister_pair_examples(tmp_path, ("medical", "law", "ted"))  # ted: not in en-de here
    assert drawn == [("medical", "Store below 25 C."), ("law", "Annex II")]
    assert sister_pair_examples(tmp_path, ("medical",), pairs=()) == []
