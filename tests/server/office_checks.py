"""Checks of translated office files that do not use the readers that chose the text:
every text node of every XML part, LibreOffice's PDF export, and a translator that runs
segments through the real server's batch path."""

from __future__ import annotations

import io
import re
import subprocess
import zipfile
from collections.abc import Sequence
from pathlib import Path

from fastapi.testclient import TestClient
from lxml import etree

from server.documents.formats.base import Segment
from server.textproc.languages import LanguageDetector
from tests.services import require_program

# Parts no reader of the document sees as text: package metadata (author, generator),
# settings, and the prompts of slide layouts and masters ("Click to edit Master title"; an
# OpenDocument presentation keeps its masters in styles.xml).
NOT_SEEN = re.compile(r"docProps/.*|meta\.xml|settings\.xml|META-INF/.*|\[Content_Types\]\.xml"
                      r"|.*\.rels|ppt/(?:slideLayouts|slideMasters|notesMasters|handoutMasters)"
                      r"/.*|.*/(?:fontTable|webSettings|theme/theme\d*)\.xml")
# A spreadsheet's formulas are code, not text (SpreadsheetML `f`).
FORMULAS = frozenset({"{http://schemas.openxmlformats.org/spreadsheetml/2006/main}f"})
_LETTERS = re.compile(r"[^\W\d_]")
# Deleted text of a tracked change stays as the author deleted it.
DELETED = ("{http://schemas.openxmlformats.org/wordprocessingml/2006/main}delText",
           "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}deletion")


def text_nodes(data: bytes) -> list[str]:
    """Every text and tail of every XML part a reader may see, whitespace-only ones
    dropped (OOXML keeps a run's text in one node; ODF splits it around spans and
    spaces, whose pieces are nodes too)."""
    out: list[str] = []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        presentation = b"presentation" in (archive.read("mimetype")
                                           if "mimetype" in archive.namelist() else b"")
        for name in archive.namelist():
            body = archive.read(name)
            if (not name.endswith(".xml") or NOT_SEEN.fullmatch(name) or not body.strip()
                    or (presentation and name == "styles.xml")):
                continue
            root = etree.fromstring(body, etree.XMLParser(resolve_entities=False,
                                                          no_network=True))
            for element in [*root.iter(*DELETED, *FORMULAS)]:
                parent = element.getparent()
                if parent is not None:
                    element.tail = None
                    parent.remove(element)
            for element in root.iter():
                for text in (element.text, element.tail):
                    if text and text.strip():
                        out.append(text.strip())
    return out


def wordy(nodes: Sequence[str], words: int = 3) -> list[str]:
    """The nodes of `words` or more words (tokens with two letters or more)."""
    return [node for node in nodes
            if sum(len(_LETTERS.findall(token)) >= 2 for token in node.split()) >= words]


def replaced_share(source: bytes, output: bytes) -> float:
    """Of the output's nodes with 3+ words, the share that is not a source node: with a
    model whose output is not a language, what shows the translator replaced them."""
    before = set(wordy(text_nodes(source)))
    after = wordy(text_nodes(output))
    assert after, "the output holds no text node of 3+ words"
    return sum(node not in before for node in after) / len(after)


def converts_to_pdf(data: bytes, suffix: str, tmp_path: Path) -> bytes:
    """LibreOffice opens the file and exports it; the PDF's bytes."""
    work = tmp_path / f"pdf-{suffix.strip('.')}"
    work.mkdir()
    source = work / f"document{suffix}"
    source.write_bytes(data)
    soffice = require_program("soffice")
    subprocess.run([soffice, f"-env:UserInstallation=file://{work / 'profile'}", "--headless",
                    "--convert-to", "pdf", "--outdir", str(work), str(source)],
                   check=True, capture_output=True, timeout=240)
    pdf = work / "document.pdf"
    assert pdf.exists(), f"LibreOffice did not convert {source.name}"
    return pdf.read_bytes()


def translate(client: TestClient, segments: Sequence[Segment]) -> list[str]:
    """Every segment through the server's /translate/batch, 32 at a time."""
    out: list[str] = []
    for start in range(0, len(segments), 32):
        items = [{"text": s.text, "format": s.fmt} for s in segments[start:start + 32]]
        response = client.post("/translate/batch", json={"items": items})
        assert response.status_code == 200, response.text
        out += [result["translation"] for result in response.json()["results"]]
    return out


def target_share(output: bytes, target: str, languages: list[str]) -> tuple[float, list[str]]:
    """Of the output's text nodes with 3+ words, the share that language ID (py3langid
    over `languages`) puts in `target`; and the nodes it does not."""
    detector = LanguageDetector(languages)
    nodes = wordy(text_nodes(output))
    assert nodes, "the output holds no text node of 3+ words"
    others = [node for node in nodes if detector.rank(node)[0].language != target]
    return 1 - len(others) / len(nodes), others
