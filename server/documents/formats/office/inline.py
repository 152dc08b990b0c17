"""A paragraph's runs as one HTML segment, and its translation written back as runs.

An office paragraph is a sequence of runs, each with its own formatting, and things that
are not text (a tab, an image, a footnote reference, a bookmark, a field's code). Words
are split across runs for reasons a reader never sees (spell checking, edit sessions),
and a bold word sits in the middle of a sentence. So a paragraph is translated as one
segment of HTML, which the markup pipeline (server/textproc) handles like any other:

- the text of the paragraph's most common formatting is plain text (its *base*);
- each stretch of other formatting (bold, a link, a tracked insertion, a styled span) is
  `<span data-run="i">...</span>`, which the translation keeps around the right words;
  consecutive runs of one formatting are one stretch, so text split across runs is one;
- everything else is `<img data-object="j">` (kept where the translation puts it) or, for
  a line break, `<br data-object="j">` (a sentence boundary).

Writing back rebuilds the paragraph's content from the translation: each piece of text
goes into the containers (run, hyperlink, insertion, span) of the stretch it belongs to,
the originals reused once and copied after that; objects are moved whole. Objects keep
their source order (the translation only chooses where they stand), so a bookmark's
start stays before its end and a field's code before its result.

A format describes its XML through a `Dialect`: which elements are runs and containers,
what makes two runs' formatting equal, and how text and children are added.
"""

from __future__ import annotations

import copy
import html
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Protocol

from lxml import etree

Element = etree._Element
Chain = tuple[Element, ...]  # the containers from the paragraph down to a leaf


@dataclass(frozen=True)
class Leaf:
    chain: Chain
    text: str | None = None  # a text leaf's text
    objects: tuple[Element, ...] = ()  # an object leaf's elements, moved whole
    breaks: bool = False  # an object that ends a sentence (a line break)


class Dialect(Protocol):
    def leaves(self, paragraph: Element) -> list[Leaf]:
        """The paragraph's text and objects in document order."""
        ...

    def signature(self, container: Element) -> Hashable:
        """Equal for containers whose text looks the same (same formatting)."""
        ...

    def formatting_only(self, container: Element) -> bool:
        """Whether the container only formats (a run, a span), so its text may be the
        paragraph's base; a link or an insertion is never."""
        ...

    def clear(self, element: Element) -> None:
        """Removes the element's content, keeping its properties (`w:rPr`, `a:pPr`)."""
        ...

    def copy(self, container: Element) -> Element:
        """An empty copy of a container, properties kept."""
        ...

    def add_text(self, parent: Element, text: str) -> None: ...

    def add_child(self, parent: Element, child: Element) -> None: ...


@dataclass
class InlinePlan:
    html: str  # the segment
    stretches: list[Chain]  # data-run i: the chain of the stretch's first leaf
    base: Chain  # the chain of plain text
    objects: list[Leaf]  # data-object j


def has_words(text: str) -> bool:
    return any(char.isalpha() for char in text)


def plan(paragraph: Element, dialect: Dialect) -> InlinePlan | None:
    """The paragraph as a segment; None when it holds no words (it stays as it is)."""
    leaves = _joined_objects(dialect.leaves(paragraph))
    if not has_words("".join(leaf.text or "" for leaf in leaves)):
        return None
    keys = [_key(leaf.chain, dialect) for leaf in leaves]
    base_key = _base_key(leaves, keys, dialect)
    out: list[str] = []
    result = InlinePlan("", [], (), [])
    open_key: Hashable | None = None
    for leaf, key in zip(leaves, keys, strict=True):
        if leaf.text is None or key == base_key or key != open_key:
            if open_key is not None:
                out.append("</span>")
            open_key = None
        if leaf.text is None:
            tag = "br" if leaf.breaks else "img"
            out.append(f'<{tag} data-object="{len(result.objects)}">')
            result.objects.append(leaf)
            continue
        if key == base_key:
            result.base = result.base or leaf.chain
        elif open_key is None:
            out.append(f'<span data-run="{len(result.stretches)}">')
            result.stretches.append(leaf.chain)
            open_key = key
        out.append(html.escape(leaf.text, quote=False))
    if open_key is not None:
        out.append("</span>")
    result.html = "".join(out)
    if base_key is None:  # every stretch is a link or an insertion: added text joins one
        result.base = result.stretches[0]
    return result


def _joined_objects(leaves: Sequence[Leaf]) -> list[Leaf]:
    """Adjacent objects in the same containers as one (a comment's range end and its
    reference): fewer markers for the translation to place."""
    out: list[Leaf] = []
    for leaf in leaves:
        last = out[-1] if out else None
        if (last is not None and leaf.text is None and last.text is None
                and not (leaf.breaks or last.breaks) and len(last.chain) == len(leaf.chain)
                and all(a is b for a, b in zip(last.chain, leaf.chain, strict=True))):
            out[-1] = Leaf(last.chain, objects=last.objects + leaf.objects)
        else:
            out.append(leaf)
    return out


def _key(chain: Chain, dialect: Dialect) -> tuple[Hashable, ...]:
    return tuple(dialect.signature(container) for container in chain)


def _base_key(leaves: Sequence[Leaf], keys: Sequence[tuple[Hashable, ...]],
              dialect: Dialect) -> tuple[Hashable, ...] | None:
    """The formatting-only key with the most text."""
    sizes: dict[tuple[Hashable, ...], int] = {}
    for leaf, key in zip(leaves, keys, strict=True):
        if leaf.text and all(dialect.formatting_only(c) for c in leaf.chain):
            sizes[key] = sizes.get(key, 0) + len(leaf.text.strip())
    return max(sizes, key=lambda k: sizes[k]) if sizes else None


@dataclass
class _Piece:
    text: str | None  # None: the object `number`
    run: int | None = None  # the stretch a text belongs to (None: base)
    number: int = 0


class _Translation(HTMLParser):
    """The translated segment as pieces of text (with their stretch) and objects."""

    def __init__(self, stretches: int, objects: int) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[_Piece] = []
        self.open: list[int | None] = []
        self.limits = (stretches, objects)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in ("img", "br"):
            number = _number(values.get("data-object"), self.limits[1])
            if number is not None:
                self.pieces.append(_Piece(None, number=number))
        elif tag == "span":
            self.open.append(_number(values.get("data-run"), self.limits[0]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and self.open:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        run = next((r for r in reversed(self.open) if r is not None), None)
        if self.pieces and self.pieces[-1].text is not None and self.pieces[-1].run == run:
            self.pieces[-1].text = (self.pieces[-1].text or "") + data
        else:
            self.pieces.append(_Piece(data, run))


def _number(value: str | None, limit: int) -> int | None:
    return int(value) if value is not None and value.isdigit() and int(value) < limit else None


def pieces_of(translation: str, inline: InlinePlan) -> list[_Piece]:
    """The translation's pieces, every object exactly once, in source order: the
    translation chooses where objects stand, not their order; one it lost goes last."""
    parser = _Translation(len(inline.stretches), len(inline.objects))
    parser.feed(translation)
    parser.close()
    pieces: list[_Piece] = []
    seen: set[int] = set()
    for piece in parser.pieces:
        if piece.text is None:
            if piece.number in seen:
                continue
            seen.add(piece.number)
        pieces.append(piece)
    pieces += [_Piece(None, number=n) for n in range(len(inline.objects)) if n not in seen]
    order = iter(sorted(p.number for p in pieces if p.text is None))
    for piece in pieces:
        if piece.text is None:
            piece.number = next(order)
    return pieces


def write(paragraph: Element, inline: InlinePlan, translation: str,
          dialect: Dialect) -> None:
    """Replaces the paragraph's content with the translation's pieces."""
    pieces = pieces_of(translation, inline)
    dialect.clear(paragraph)
    open_: list[tuple[Element, Element]] = []  # (source container, the one written)
    used: set[int] = set()
    for piece in pieces:
        if piece.text is None:
            leaf = inline.objects[piece.number]
            chain = leaf.chain
        else:
            chain = inline.base if piece.run is None else inline.stretches[piece.run]
        shared = 0
        while (shared < min(len(open_), len(chain))
               and open_[shared][0] is chain[shared]):
            shared += 1
        del open_[shared:]
        for container in chain[shared:]:
            if id(container) in used:
                written = dialect.copy(container)
            else:
                used.add(id(container))
                dialect.clear(container)
                written = container
            dialect.add_child(open_[-1][1] if open_ else paragraph, written)
            open_.append((container, written))
        parent = open_[-1][1] if open_ else paragraph
        if piece.text is None:
            for element in leaf.objects:
                dialect.add_child(parent, element)
        elif piece.text:
            dialect.add_text(parent, piece.text)


def empty_copy(container: Element, dialect: Dialect) -> Element:
    """A deep copy cleared of content: what most dialects' `copy` is."""
    duplicate = copy.deepcopy(container)
    duplicate.tail = None
    dialect.clear(duplicate)
    return duplicate
