"""`make bench-documents` against a live tiny server on a folder of small files (made
here, never the shared corpora): a row per file with units, % translated, structure and
both paths' times. Nothing here asserts on speed."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.documents import corpus, office_corpus
from benchmarks.documents.run import main

LINES = ["The patient takes one tablet a day.", "Click the Save button to keep the file.",
         "The council adopted this regulation.", "Open the window and close the door."]


def test_the_benchmark_reports_every_file(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "film.srt").write_bytes(corpus.srt(LINES))
    (folder / "app.po").write_bytes(corpus.po(LINES))
    (folder / "notes.txt").write_bytes(corpus.txt(LINES))
    (folder / "leaflet.docx").write_bytes(office_corpus.leaflet_docx(LINES * 3))
    (folder / "deck.odp").write_bytes(office_corpus.deck_odp(LINES * 2))
    (folder / "ignored.pdf").write_bytes(b"%PDF")
    out = tmp_path / "out"
    main(["--tiny", "--path", str(folder), "--rounds", "1", "--out", str(out)])
    rows = json.loads((out / "documents.json").read_text())["rows"]
    assert [row["file"] for row in rows] == ["app.po", "deck.odp", "film.srt", "leaflet.docx",
                                             "notes.txt"]
    for row in rows:
        assert row["units_in"] == row["units_out"] > 0
        assert row["structure_kept"], row["problems"]
        assert row["file_s"] > 0 and row["batch_s"] > 0
        assert 0.0 <= row["translated"] <= 1.0
    assert (out / "documents.md").read_text().count("| film.srt | srt |") == 1


def test_the_built_corpus_has_one_document_per_format(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for relative, _ in corpus.SOURCES.values():
        path = data / "en-fr" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(LINES * 5) + "\n")
    written = corpus.build(data, tmp_path / "corpus", lines=12)
    assert sorted(p.suffix for p in written) == [
        ".docx", ".html", ".md", ".odp", ".ods", ".odt", ".po", ".pptx", ".srt", ".txt",
        ".vtt", ".xlf", ".xliff", ".xlsx"]
