"""The documents of one request, built together: the Python-heavy part of preparing a
large request, which server/scheduling/preparation.py runs in a worker process of its own.
Plain data in and out (everything here pickles), and nothing imported beyond textproc.

The request's sentence cap is counted here too, so a request far over it (33,000 short
sentences) stops at the text that crosses it, and that text's document never travels back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from server.textproc.document import Document, Format, build_document
from server.textproc.glossary import Glossary
from server.textproc.line_layout import SplitMode
from server.textproc.masking import TermMode


@dataclass(frozen=True)
class DocumentSpec:
    text: str
    fmt: Format
    glossary: Glossary | None
    split: SplitMode = "on"


@dataclass(frozen=True)
class TooManySentences:
    """Stands for the document of the text that takes the request past its sentence cap."""

    sentences: int  # that text's sentences


def build_documents(specs: Sequence[DocumentSpec], *, terms: TermMode,
                    max_sentences: int) -> list[Document | TooManySentences]:
    """One document per spec, in order, up to the first text whose sentences take the
    total past `max_sentences` (a `TooManySentences` ends the list there)."""
    out: list[Document | TooManySentences] = []
    total = 0
    for spec in specs:
        document = build_document(spec.text, fmt=spec.fmt, glossary=spec.glossary,
                                  split=spec.split,
                                  terms=terms)
        sentences = len(document.sources())
        total += sentences
        if total > max_sentences:
            out.append(TooManySentences(sentences))
            break
        out.append(document)
    return out
