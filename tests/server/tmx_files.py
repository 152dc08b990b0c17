"""TMX files written by two real writers for the memory tests: translate-toolkit's TMX
writer, and python-tmx's (tuids and creation attributes, props and notes, inline codes,
regional language codes, in UTF-16 with a byte-order mark or in UTF-8). The sentences
are our own."""

from __future__ import annotations

from datetime import UTC, datetime

import PythonTmx as ptmx
from lxml import etree
from translate.storage.tmx import tmxfile

Part = str | tuple[str, int, str]

TOOLKIT_PAIRS = [
    ("Click <b>Save</b> to keep your changes.",
     "Cliquez sur <b>Enregistrer</b> pour garder vos modifications."),
    ("The patient takes one tablet a day.", "Le patient prend un comprimé par jour."),
    ("Close the window before you leave.", "Fermez la fenêtre avant de partir."),
    ("Member states shall comply with this directive.",
     "Les États membres se conforment à la présente directive."),
]


def toolkit_tmx(pairs: list[tuple[str, str]] = TOOLKIT_PAIRS, *, source: str = "en-US",
                target: str = "fr-FR") -> bytes:
    """A TMX written by translate-toolkit (its own escaping, DOCTYPE and header)."""
    store = tmxfile(sourcelanguage=source, targetlanguage=target)
    for index, (english, french) in enumerate(pairs):
        unit = store.addsourceunit(english)
        unit.target = french
        if index == 0:
            unit.addnote("checked by the reviewer", origin="translator")
    return bytes(store)


# (tuid, English parts, French parts): a part is text, or ("bpt"|"ept"|"ph", i, code)
PYTHON_TMX_UNITS: list[tuple[str, list[Part], list[Part]]] = [
    ("leaflet-1", ["Take ", ("bpt", 1, "<b>"), "two", ("ept", 1, "</b>"), " tablets."],
     ["Prenez ", ("bpt", 1, "<b>"), "deux", ("ept", 1, "</b>"), " comprimés."]),
    ("leaflet-2", ["Keep out of the reach of children."],
     ["Tenir hors de la portée des enfants."]),
    ("ui-3", ["Delete ", ("ph", 1, "{count}"), " files?"],
     ["Supprimer ", ("ph", 1, "{count}"), " fichiers ?"]),
]
CREATED = datetime(2025, 1, 2, 10, 15, tzinfo=UTC)


def _content(parts: list[Part]) -> list[str | ptmx.Bpt | ptmx.Ept | ptmx.Ph]:
    content: list[str | ptmx.Bpt | ptmx.Ept | ptmx.Ph] = []
    for part in parts:
        if isinstance(part, str):
            content.append(part)
            continue
        kind, number, code = part
        if kind == "bpt":
            content.append(ptmx.Bpt(i=number, content=[code]))
        elif kind == "ept":
            content.append(ptmx.Ept(i=number, content=[code]))
        else:
            content.append(ptmx.Ph(x=number, content=[code]))
    return content


def python_tmx_unit(tuid: str | None, variants: list[tuple[str, list[Part]]]) -> ptmx.Tu:
    """One unit as python-tmx builds it: creation attributes, a prop, a note."""
    return ptmx.Tu(
        tuid=tuid, creationdate=CREATED, creationid="ANA", usagecount=3,
        props=[ptmx.Prop(type="x-Project", text="Leaflets 2025")],
        notes=[ptmx.Note(text=f"reviewed {tuid}")],
        tuvs=[ptmx.Tuv(lang=code, content=_content(parts)) for code, parts in variants])


def python_tmx_file(*, codes: tuple[str, str] = ("EN-GB", "fr_FR"),
                    extra_units: list[ptmx.Tu] | None = None,
                    encoding: str = "UTF-16") -> bytes:
    """TMX 1.4 written by python-tmx (PyPI `python-tmx`, the package since renamed
    hypomnema): its objects, its element writer (attribute names, dates, inline codes);
    lxml serialises the tree, as python-tmx's documentation does."""
    document = ptmx.Tmx(
        header=ptmx.Header(
            creationtool="python-tmx", creationtoolversion="0.3.1",
            segtype=ptmx.SEGTYPE.SENTENCE, tmf="PythonTmx", adminlang="en-US",
            srclang=codes[0], datatype="plaintext", encoding=encoding.lower(),
            props=[ptmx.Prop(type="x-Client", text="Pharma Nord")]),
        tus=[python_tmx_unit(tuid, [(codes[0], english), (codes[1], french)])
             for tuid, english, french in PYTHON_TMX_UNITS] + list(extra_units or []))
    return etree.tostring(ptmx.to_element(document, True), encoding=encoding,
                          xml_declaration=True)


def one_sided_unit(text: str, code: str = "en-GB") -> ptmx.Tu:
    """A misaligned unit: a source segment and no target."""
    return ptmx.Tu(tuvs=[ptmx.Tuv(lang=code, content=[text])])


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE tmx [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<tmx version="1.4"><header srclang="en"/><body>
<tu><tuv xml:lang="en"><seg>&lol9;</seg></tuv><tuv xml:lang="fr"><seg>&lol9;</seg></tuv></tu>
</body></tmx>
"""

EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE tmx [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<tmx version="1.4"><header srclang="en"/><body>
<tu><tuv xml:lang="en"><seg>&secret;</seg></tuv><tuv xml:lang="fr"><seg>x</seg></tuv></tu>
</body></tmx>
"""
