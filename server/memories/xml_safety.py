"""XML read safely, as a stream: expat through defusedxml, with every entity declaration
and external reference refused when the parser meets it (`HostileXml`), so that a
billion-laughs file or an XML bomb is refused before one entity expands and a file that
points outside never reaches the network or the disk. A document type declaration
without entities (`<!DOCTYPE tmx SYSTEM "tmx14.dtd">`, as CAT tools write it) is read;
the DTD itself is never fetched. UTF-8 and UTF-16 (with a byte-order mark or an encoding
declaration) are read alike.

Inline markup of segments (TMX 1.4 and XLIFF): `bpt`, `ept`, `ph`, `it`, `ut` hold the
native code they stand for (`&lt;b&gt;`), which is written back as it was (`<b>`);
wrappers (`hi`, `g`, `mrk`, `pc`) keep their text; empty codes (`x`, `bx`, `ex`, XLIFF
2's `ph`, `sc`, `ec`) have no native code to write.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any
from xml.etree.ElementTree import Element, ParseError

import defusedxml
import defusedxml.ElementTree as safe_tree

from server.memories.read_units import HostileXml, ImportRefused, Progress

CODES = frozenset({"bpt", "ept", "ph", "it", "ut"})
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


def local(tag: Any) -> str:
    """An element's name without its namespace (comments and the like: "")."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


class Counting:
    """A binary stream that reports how many bytes were read (the job's progress)."""

    def __init__(self, stream: IO[bytes], progress: Progress | None) -> None:
        self._stream = stream
        self._progress = progress
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.read_bytes += len(data)
        if self._progress is not None:
            self._progress(self.read_bytes)
        return data


def events(stream: IO[bytes], progress: Progress | None = None
           ) -> Iterator[tuple[str, Element]]:
    """("start" | "end", element) of the stream, parsed safely (see above)."""
    try:
        yield from safe_tree.iterparse(Counting(stream, progress), events=("start", "end"),
                                       forbid_dtd=False, forbid_entities=True,
                                       forbid_external=True)
    except defusedxml.DefusedXmlException as error:
        raise HostileXml(f"refused: the file declares entities or refers to external "
                         f"resources ({type(error).__name__}); export it without a DTD "
                         "subset") from error
    except ParseError as error:
        raise ImportRefused(f"not well-formed XML ({error}); the file may be truncated "
                            "or not XML") from None


def segment_text(element: Element) -> str:
    """A segment's text with its inline codes written as their native code."""
    out = [element.text or ""]
    for child in element:
        name = local(child.tag)
        if name in CODES:
            out.append("".join(child.itertext()))
        elif name:
            out.append(segment_text(child))
        out.append(child.tail or "")
    return "".join(out)
