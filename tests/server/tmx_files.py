"""TMX files written by real writers for the memory tests: translate-toolkit's TMX
writer, and an lxml-built TMX 1.4 as CAT tools write it (UTF-16 with a byte-order mark,
a DOCTYPE, tuids and dates, props and notes, inline codes, regional language codes).
The sentences are our own."""

from __future__ import annotations

from lxml import etree
from translate.storage.tmx import tmxfile

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"

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
CAT_UNITS = [
    ("leaflet-1", ["Take ", ("bpt", 1, "<b>"), "two", ("ept", 1, "</b>"), " tablets."],
     ["Prenez ", ("bpt", 1, "<b>"), "deux", ("ept", 1, "</b>"), " comprimés."]),
    ("leaflet-2", ["Keep out of the reach of children."],
     ["Tenir hors de la portée des enfants."]),
    ("ui-3", ["Delete ", ("ph", 1, "{count}"), " files?"],
     ["Supprimer ", ("ph", 1, "{count}"), " fichiers ?"]),
]


def _segment(parts: list[object]) -> etree._Element:
    seg = etree.Element("seg")
    last: etree._Element | None = None
    for part in parts:
        if isinstance(part, str):
            if last is None:
                seg.text = (seg.text or "") + part
            else:
                last.tail = (last.tail or "") + part
            continue
        kind, number, code = part  # type: ignore[misc]
        last = etree.SubElement(seg, kind, {"i" if kind != "ph" else "x": str(number)})
        last.text = code
    return seg


def cat_tool_tmx(*, codes: tuple[str, str] = ("EN-GB", "fr_FR"),
                 extra_units: list[etree._Element] | None = None) -> bytes:
    """TMX 1.4 as a CAT tool exports it, written with lxml in UTF-16."""
    root = etree.Element("tmx", version="1.4")
    etree.SubElement(root, "header", {
        "creationtool": "SomeCAT", "creationtoolversion": "12.0", "segtype": "sentence",
        "o-tmf": "SomeCAT TM", "adminlang": "en-US", "srclang": codes[0],
        "datatype": "xml"})
    body = etree.SubElement(root, "body")
    for tuid, english, french in CAT_UNITS:
        unit = etree.SubElement(body, "tu", tuid=tuid, creationdate="20250102T101500Z",
                                creationid="ANA", usagecount="3")
        prop = etree.SubElement(unit, "prop", type="x-Project")
        prop.text = "Leaflets 2025"
        note = etree.SubElement(unit, "note")
        note.text = f"reviewed {tuid}"
        for code, parts in ((codes[0], english), (codes[1], french)):
            variant = etree.SubElement(unit, "tuv", {XML_LANG: code})
            variant.append(_segment(parts))  # type: ignore[arg-type]
    for extra in extra_units or []:
        body.append(extra)
    return etree.tostring(root, encoding="UTF-16", xml_declaration=True,
                          doctype='<!DOCTYPE tmx SYSTEM "tmx14.dtd">')


def one_sided_unit(text: str, code: str = "en-GB") -> etree._Element:
    """A misaligned unit: a source segment and no target."""
    unit = etree.Element("tu")
    variant = etree.SubElement(unit, "tuv", {XML_LANG: code})
    etree.SubElement(variant, "seg").text = text
    return unit


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
