"""The forward-translation benchmark on the shipped en->de model and a tiny data folder:
it translates only in-domain sources the direction has never seen, and reports the new
adapter beside the published one."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.quality.forward_translation import main, unseen_sources
from trainer.recipes.directions import EN_DE, Direction
from trainer.recipes.training_set import DOMAINS

GERMAN = [("The patient takes the tablet.", "Der Patient nimmt die Tablette."),
          ("Store below 25 degrees.", "Nicht über 25 Grad lagern."),
          ("Ask your doctor.", "Fragen Sie Ihren Arzt.")]
FRENCH = [("The patient takes the tablet.", "Le patient prend le comprimé."),
          ("Keep out of the reach of children.", "Tenir hors de la portée des enfants."),
          ("Do not shake the vial.", "Ne pas agiter le flacon."),
          ("Do not shake the vial.", "Ne secouez pas le flacon.")]


def write_data(root: Path) -> Path:
    for domain in DOMAINS:
        for pair, rows in (("en-de", GERMAN), ("en-fr", FRENCH)):
            folder = root / pair / "domains" / domain
            folder.mkdir(parents=True)
            other = pair.split("-")[1]
            for split, chosen in (("train", rows), ("dev", rows[1:2]), ("test", rows[2:3])):
                (folder / f"{split}.en").write_text("".join(s + "\n" for s, _ in chosen))
                (folder / f"{split}.{other}").write_text("".join(t + "\n" for _, t in chosen))
    return root


def test_only_sources_the_direction_never_saw_are_translated(tmp_path: Path) -> None:
    data = write_data(tmp_path / "data")
    fresh = unseen_sources(data, EN_DE, Direction("en", "fr", pair="en-fr"), "medical")
    # en-fr's first train sentence is one of en-de's too; a repeated one is translated once
    assert fresh == ["Keep out of the reach of children.", "Do not shake the vial."]


def test_the_report_puts_the_new_adapter_beside_the_published_one(tmp_path: Path) -> None:
    data = write_data(tmp_path / "data")
    main(["--data", str(data), "--domains", "medical", "--steps", "2", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "forward_translation-en-de.json").read_text())
    row = report["domains"]["medical"]
    assert row["real_pairs"] == 3 and row["synthetic_pairs"] == 2
    assert row["student_steps"] == 2
    assert row["config"]["bottleneck"] == 256  # the published medical adapter's shape
    assert 0 <= row["student_dev"] <= 100 and row["published_dev"] >= 0
    text = (tmp_path / "forward_translation-en-de.md").read_text()
    assert "Made by `" in text and "| medical | 3 | 2 |" in text
