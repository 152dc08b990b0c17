"""Masking a unit's parts into the string the engine translates, and restoring them.

Markers (measured on the embedded default model, benchmarks/quality/text/markup.py): a kept
span or a glossary term becomes `{N}` (the backbone copies brace placeholders, which
software strings are full of: 75 of 80 gettext strings came back with every one), an
inline tag pair becomes `<N>` ... `</N>`. In `inline` term mode (the server's: it kept BLEU,
benchmarks/quality/text/glossary.py) a term's target is written into the source instead, and
must appear in the output; a do-not-translate term (its target is its source) is masked
in both modes, so that it comes back exactly as written.

A translation is accepted only if every marker comes back exactly once, no other marker
(nor the debris of one, such as `</1` without its `>`) appears and every pair stays
ordered, and every inline term is in it, as written or inflected (`near`: the model
adapted "dernier" to "dernière"). Otherwise `runs`/`render_runs` translate the text between
the parts separately and put every part back verbatim, in source order.

Inline mode decodes a sentence with terms in up to three passes (document.py), because
writing targets and markers into the source costs BLEU on the sentences the model gets
right by itself (1.1 and 0.95 BLEU on the terminology bench): first the source as written
(`source` mode), accepted when every term's target is there (names as written); then with
the targets written in and the names masked; then run by run.
The model's own text is escaped for its context (escaping.py): in HTML nothing it writes
can become markup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from server.textproc.escaping import Context, escape, model_text
from server.textproc.parts import Close, Open, Part, Term, Text

TermMode = Literal["protect", "inline", "source"]  # source: first passes of inline
_MARKER = re.compile(r"\{(\d+)\}|<(/?)(\d+)>")
_WORD = re.compile(r"\w+")
_LETTERISH = re.compile(r"[^\W\d_]")  # every letter (str.isalpha) and a few numerals
_DEBRIS = re.compile(r"</?[0-9]|\{[0-9]")  # left of a marker once whole ones are removed
_LINE_BREAK = re.compile(r"[ \t]*(?:\r\n|[\n\r\u2028\u2029])\s*")  # inside an HTML sentence


@dataclass(frozen=True)
class Masked:
    text: str  # what the engine translates
    replacements: dict[str, str]  # marker -> what it becomes in the output
    pairs: tuple[tuple[str, str], ...]  # (open, close) markers that must stay ordered
    required: tuple[str, ...]  # inline term targets the output must contain (`near`)
    context: Context = "text"  # where the output goes: how the model's text is escaped
    debris: int = 0  # marker-like text the source holds itself ("%<0x%x%>", "<32M")
    exact: tuple[str, ...] = ()  # do-not-translate terms it must hold as written


def mask(parts: Sequence[Part], *, terms: TermMode = "protect",
         context: Context = "text") -> Masked:
    pieces: list[str] = []
    replacements: dict[str, str] = {}
    opened: dict[int, str] = {}
    pairs: list[tuple[str, str]] = []
    required: list[str] = []
    exact: list[str] = []
    number = 0
    for part in parts:
        if isinstance(part, Text):
            pieces.append(_LINE_BREAK.sub(" ", part.text))
            continue
        # a do-not-translate term (its target is itself) is masked in either mode: it
        # comes back exactly, never inflected or re-cased by the model
        if isinstance(part, Term) and terms == "source":
            pieces.append(part.source)
            (exact if part.target == part.source else required).append(part.target)
            continue
        if isinstance(part, Term) and terms == "inline" and part.target != part.source:
            pieces.append(part.target)
            required.append(part.target)
            continue
        if isinstance(part, Close) and part.pair in opened:
            marker = "</" + opened[part.pair][1:]  # the same number as its open tag
            pairs.append((opened[part.pair], marker))
        else:
            number += 1
            if isinstance(part, Open):
                marker = f"<{number}>"
                opened[part.pair] = marker
            elif isinstance(part, Close):
                marker = f"</{number}>"
            else:
                marker = "{" + str(number) + "}"
        replacements[marker] = (escape(part.target, context) if isinstance(part, Term)
                                else part.raw)
        pieces.append(marker)
    text = "".join(pieces)
    return Masked(text, replacements, tuple(pairs), tuple(required), context,
                  _debris(text), tuple(exact))


def unmask(masked: Masked, output: str) -> str | None:
    """The output with every marker replaced, or None when the markers did not survive."""
    found = [m.group(0) for m in _MARKER.finditer(output)]
    if sorted(found) != sorted(masked.replacements):
        return None
    if _debris(output) > masked.debris:
        return None
    lowered = output.lower()
    if not all(near(target, lowered) for target in masked.required) or not all(
            re.search(rf"(?<!\w){re.escape(term)}(?!\w)", output) for term in masked.exact):
        return None
    position = {marker: index for index, marker in enumerate(found)}
    if any(position[first] > position[second] for first, second in masked.pairs):
        return None
    out: list[str] = []
    cursor = 0
    for match in _MARKER.finditer(output):
        out.append(model_text(output[cursor: match.start()], masked.context))
        out.append(masked.replacements[match.group(0)])
        cursor = match.end()
    out.append(model_text(output[cursor:], masked.context))
    return "".join(out)


def near(target: str, lowered: str) -> bool:
    """Whether the lower-cased output holds `target` or an inflection of it: each of its
    words whole, or, from 5 letters, a word starting with all of it but its last 3 letters
    (at least 4): "confirmé" / "confirme", "hôpital" / "hôpitaux"."""
    for word in _WORD.findall(target.lower()):
        stem = word if len(word) < 5 else word[: max(4, len(word) - 3)]
        tail = r"(?!\w)" if stem == word else ""
        if re.search(rf"(?<!\w){re.escape(stem)}{tail}", lowered) is None:
            return False
    return True


def _debris(text: str) -> int:
    return len(_DEBRIS.findall(_MARKER.sub(" ", text)))


def runs(parts: Sequence[Part]) -> list[str]:
    """The texts between non-text parts that need translating (stripped, with letters)."""
    return [_LINE_BREAK.sub(" ", part.text.strip()) for part in parts
            if isinstance(part, Text) and _wordy(part.text)]


def render_runs(parts: Sequence[Part], translations: Sequence[str], *,
                context: Context = "text") -> str:
    """The unit rebuilt from separately translated runs; every other part verbatim (a
    term as its target), each run keeping its surrounding whitespace."""
    supply = iter(translations)
    out: list[str] = []
    for part in parts:
        if isinstance(part, Text):
            if _wordy(part.text):
                text = part.text
                lead = text[: len(text) - len(text.lstrip())]
                trail = text[len(text.rstrip()):]
                translated = model_text(next(supply), context)
                if not lead and _glued(out, text, translated):
                    lead = " "  # the run began with punctuation the model left out
                out.append(lead + translated + trail)
            else:
                out.append(part.text)
        elif isinstance(part, Term):
            out.append(escape(part.target, context))
        else:
            out.append(part.raw)
    return "".join(out)


def _glued(out: Sequence[str], text: str, translated: str) -> bool:
    """Whether `translated` would glue two words that `text` kept apart: the run began
    with a non-word character (", CEO of"), the output does not, and what precedes ends a
    word ("Taylor" + "CEO")."""
    before = out[-1][-1:] if out else ""
    return (before.isalnum() and translated[:1].isalnum() and bool(text)
            and not text[0].isalnum())


def needs_translation(parts: Sequence[Part]) -> bool:
    """Only units with words go to the engine; the rest render verbatim (terms as
    their targets)."""
    return any(isinstance(p, Text) and _wordy(p.text) for p in parts)


def _wordy(text: str) -> bool:
    # letters are among \w less digits and "_"; the regex skips runs of other characters
    # in C (9,999 dots), isalpha() settles the few word characters that are not letters
    return any(found.group().isalpha() for found in _LETTERISH.finditer(text))
