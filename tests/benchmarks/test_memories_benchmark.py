"""The memories benchmark on a small corpus of our own in the shared data's layout: the
import, lookup, coverage and hostile-file sections are measured and reported, and the
coverage counts what the corpus holds."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.quality.memories import DOMAINS, main

TRAIN = [("The patient takes one tablet a day with water.",
          "Le patient prend un comprimé par jour avec de l'eau."),
         ("Keep the bottle tightly closed.", "Gardez le flacon bien fermé."),
         ("Store below twenty five degrees.", "À conserver en dessous de vingt-cinq degrés.")]
TEST = [("Keep the bottle tightly closed.", "Gardez le flacon bien fermé."),  # exact
        ("The patient takes two tablets a day with water.",  # fuzzy
         "Le patient prend deux comprimés par jour avec de l'eau."),
        ("Nothing like any training sentence here.", "Rien de tel.")]


def write(folder: Path, split: str, pairs: list[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.en").write_text("".join(s + "\n" for s, _ in pairs))
    (folder / f"{split}.fr").write_text("".join(t + "\n" for _, t in pairs))


def test_the_benchmark_measures_and_reports_every_section(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for domain in DOMAINS:
        folder = data / "en-fr" / "domains" / domain
        write(folder, "train", [(f"{s} ({domain})", t) for s, t in TRAIN])
        write(folder, "test", [(f"{s} ({domain})", t) for s, t in TEST])
    out = tmp_path / "results"
    main(["--data", str(data), "--quick", "--rounds", "1", "--out", str(out)])

    results = json.loads((out / "memories.json").read_text())
    assert results["import"]["pairs"] == len(TRAIN) * len(DOMAINS)
    assert results["lookup"]["pairs"] == len(TRAIN) * len(DOMAINS)
    assert results["lookup"]["sentences"] == len(TEST) * len(DOMAINS)
    assert results["lookup"]["with_a_match"] == 2 * len(DOMAINS)
    for row in results["coverage"]:
        assert (row["exact"], row["fuzzy_75"], row["sentences"]) == (1, 1, 3)
    assert results["hostile"]["refused_by"] == "EntitiesForbidden"
    report = (out / "memories.md").read_text()
    assert "\nMade by `" in report and "| medical | 3 | 1 | 1 |" in report
