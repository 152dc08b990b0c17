"""TBX files written by real terminology tools, imported through the native glossary API
(`PUT /admin/glossaries/{name}`, content type application/x-tbx) on a test server: the
glossary holds every term pair the writer put in, and nothing else.

Writers: translate-toolkit's `tbxfile` (the library Weblate, Pootle and Virtaal store
TBX with; our pinned version), and Weblate 5.14.3's own glossary export (its TBXExporter,
run in the Weblate venv through tests/weblate/tbx_export.py). Weblate's exporter writes no
term status: a glossary term flagged `forbidden` in Weblate leaves as an ordinary term
pair (its TBX exporter's store_flags() writes nothing), so the file carries no forbidden
term for the server to keep; the test checks that it imports as the plain pair it is."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import admin_headers
from fastapi.testclient import TestClient
from translate.storage.tbx import tbxfile

from tests.services import require_program, unavailable

ROOT = Path(__file__).resolve().parents[2]
WEBLATE_VENV = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / \
    "nmt-server" / "weblate-venv"
EXPORT = ROOT / "tests" / "weblate" / "tbx_export.py"
TERMS = {"hard drive": "disque dur", "e-mail": "courriel", "download": "télécharger",
         "Weblate": "Weblate"}


def import_tbx(client: TestClient, name: str, data: bytes) -> dict[str, object]:
    """The stored glossary after `data` is PUT as an en->fr TBX glossary."""
    created = client.put(f"/admin/glossaries/{name}", content=data,
                         headers=admin_headers() | {"content-type": "application/x-tbx"},
                         params={"source_lang": "en", "target_lang": "fr"})
    assert created.status_code == 201, created.text
    assert created.json()["size"] == len(TERMS)
    detail: dict[str, object] = client.get(f"/admin/glossaries/{name}",
                                           headers=admin_headers()).json()
    return detail


def test_a_termbase_written_by_translate_toolkit_imports(client: TestClient) -> None:
    store = tbxfile(sourcelanguage="en", targetlanguage="fr")
    for source, target in TERMS.items():
        unit = store.addsourceunit(source)
        unit.settarget(target, "fr")
        if source == "hard drive":  # a note on the concept, as translators add them
            unit.addnote("the disk inside a computer", origin="translator")
    data = bytes(store)
    assert b"<martif" in data and b"the disk inside a computer" in data
    detail = import_tbx(client, "toolkit", data)
    assert detail["entries"] == TERMS
    assert detail["forbidden"] == []


def test_a_glossary_exported_by_weblate_imports(client: TestClient) -> None:
    require_program("python3", at="/usr/bin/python3")
    if not (WEBLATE_VENV / ".installed").exists():
        unavailable(f"no Weblate venv at {WEBLATE_VENV}: `make weblate-venv` (which "
                    "`make test` runs) builds it")
    terms = [f"{source}={target}" for source, target in TERMS.items()]
    terms[0] += "=the disk inside a computer"  # Weblate's explanation of the term
    terms[2] += "==forbidden"  # flagged forbidden in Weblate: the export drops the flag
    exported = subprocess.run(
        [str(WEBLATE_VENV / "bin" / "python"), str(EXPORT),
         *(arg for term in terms for arg in ("--term", term))],
        capture_output=True, timeout=300, check=False)
    assert exported.returncode == 0, exported.stderr.decode()
    data = exported.stdout
    assert b"<martif" in data and b"the disk inside a computer" in data
    assert b"forbidden" not in data  # no status written (see the module's docstring)
    detail = import_tbx(client, "weblate", data)
    assert detail["entries"] == TERMS
    assert detail["forbidden"] == []


UNTRANSLATABLE = b"""<?xml version="1.0" encoding="UTF-8"?>
<martif type="TBX" xml:lang="en"><text><body>
  <termEntry id="weblate">
    <descrip type="Translation needed">no</descrip>
    <langSet xml:lang="en"><tig><term>Weblate</term></tig></langSet>
  </termEntry>
  <termEntry id="server">
    <descrip type="Translation needed">yes</descrip>
    <langSet xml:lang="en"><tig><term>server</term></tig></langSet>
    <langSet xml:lang="fr"><tig><term>serveur</term></tig></langSet>
  </termEntry>
</body></text></martif>"""


def test_the_untranslatable_mark_translate_toolkit_reads_is_do_not_translate(
        client: TestClient) -> None:
    """Neither writer above has a way to write it, but translate-toolkit (and Weblate's TBX
    import through it) reads `<descrip type="Translation needed">no</descrip>` as an
    untranslatable term: its own reader is the judge of the file, then ours agrees."""
    units = tbxfile.parsestring(UNTRANSLATABLE).units
    assert [(u.source, u.istranslatable()) for u in units] == [
        ("Weblate", False), ("server", True)]
    created = client.put("/admin/glossaries/marks", content=UNTRANSLATABLE,
                         headers=admin_headers() | {"content-type": "application/x-tbx"},
                         params={"source_lang": "en", "target_lang": "fr"})
    assert created.status_code == 201, created.text
    detail = client.get("/admin/glossaries/marks", headers=admin_headers()).json()
    assert detail["entries"] == {"Weblate": "Weblate", "server": "serveur"}
