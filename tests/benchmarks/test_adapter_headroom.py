"""The adapter headroom benchmark on the shipped backbones and a tiny data folder: its NLL
tells a right translation from a wrong one, and its report is dev - train per domain."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.quality.adapter_headroom import load_backbone, main, nll_per_token
from trainer.recipes.directions import EN_FR
from trainer.recipes.training_set import DOMAINS

TEXTS = {
    "en": ["The patient takes the tablet.", "Click the button to save the file."],
    "fr": ["Le patient prend le comprimé.",
           "Cliquez sur le bouton pour enregistrer le fichier."],
    "de": ["Der Patient nimmt die Tablette.",
           "Klicken Sie auf die Schaltfläche, um die Datei zu speichern."],
}


def test_a_right_translation_costs_fewer_nats_than_a_wrong_one() -> None:
    model, tokenizer = load_backbone(EN_FR)
    right = nll_per_token(model, tokenizer, [(TEXTS["en"][0], TEXTS["fr"][0])])
    wrong = nll_per_token(model, tokenizer, [(TEXTS["en"][0], TEXTS["fr"][1])])
    assert 0 < right < wrong


def test_the_report_gives_each_directions_gap_per_domain(tmp_path: Path) -> None:
    for pair in ("en-fr", "en-de"):
        for domain in DOMAINS:
            folder = tmp_path / "data" / pair / "domains" / domain
            folder.mkdir(parents=True)
            for split, index in (("train", 0), ("dev", 1), ("test", 1)):
                for language in pair.split("-"):
                    (folder / f"{split}.{language}").write_text(TEXTS[language][index] + "\n")
    main(["--data", str(tmp_path / "data"), "--pairs", "1", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "adapter_headroom.json").read_text())
    assert set(report) == {"en-fr", "fr-en", "en-de"}
    for row in report.values():
        assert set(row["domains"]) == set(DOMAINS)
        gaps = [nll["dev"] - nll["train"] for nll in row["domains"].values()]
        assert abs(row["mean_gap"] - sum(gaps) / len(gaps)) < 1e-2
        assert all(nll["train"] > 0 for nll in row["domains"].values())
    text = (tmp_path / "adapter_headroom.md").read_text()
    assert text.startswith("# Adapter headroom") and "Made by `" in text
    assert text.count("| medical |") == 3
