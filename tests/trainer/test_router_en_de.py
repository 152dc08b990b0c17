"""en->de's router and model card: the router learns from its own domains' English once and
from en-fr's English medical, law, it and religion lines (as en->fr's learns from en-de's),
with every en-fr and en-de dev and test line held out; the card says how the backbone began
and which data it read."""

from __future__ import annotations

import json
from pathlib import Path

from trainer.recipes.directions import EN_DE, EN_FR, FR_EN
from trainer.recipes.model_card import EXTRA_GENRES, backbone_origin
from trainer.recipes.router_stage import sister_pair_examples, sister_pairs_of


def write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def test_each_direction_learns_from_the_other_pair_that_has_its_source_language() -> None:
    assert sister_pairs_of(EN_FR) == ("en-de",)
    assert sister_pairs_of(FR_EN) == ()  # en-de has no French
    assert sister_pairs_of(EN_DE) == ("en-fr",)


def test_en_de_sister_lines_leave_out_both_pairs_dev_and_test(tmp_path: Path) -> None:
    write_lines(tmp_path / "en-fr" / "domains" / "law" / "train.en",
                ["the court rules", "an en-de dev line", "an en-fr test line", "the court rules"])
    write_lines(tmp_path / "en-fr" / "domains" / "law" / "test.en", ["an en-fr test line"])
    write_lines(tmp_path / "en-de" / "domains" / "law" / "dev.en", ["an en-de dev line"])
    drawn = sister_pair_examples(tmp_path, ("law",), sister_pairs_of(EN_DE),
                                 held_pairs=("en-fr", "en-de"))
    assert drawn == [("law", "the court rules")]
    # en->fr's own call holds out en-fr's splits only, as it always did
    assert sister_pair_examples(tmp_path, ("law",), ("en-fr",)) == [
        ("law", "the court rules"), ("law", "an en-de dev line")]


def test_the_card_says_how_the_backbone_began(tmp_path: Path) -> None:
    assert backbone_origin(tmp_path) == "trained from scratch"
    (tmp_path / "warm_start.json").write_text(json.dumps(
        {"backbone": "backbones/default-en-fr/v5", "steps": 15405}))
    assert backbone_origin(tmp_path).startswith("warm-started from the published "
                                        "`backbones/default-en-fr/v5`")
    assert set(EXTRA_GENRES) == {EN_FR.pair, EN_DE.pair}
