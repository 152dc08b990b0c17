"""A glossary's forbidden target terms, banned during decoding: each term becomes the
target token sequences that spell it, and every sentence of the text carries them as a
`BannedSequences` guide (server/decoding/banned.py), so the search never completes one.

Which spellings are banned: the sentencepiece encoding of each term as written, in lower
case and capitalised (first letter upper), each both as sentencepiece writes it alone and
after a space (a word boundary), and without a leading word-boundary piece when that is a
piece of its own (the term glued to what precedes it). The limits: a
segmentation other than these (the model spelling the word piece by piece in a way the
tokenizer would not), or other casings ("DownLoad") are not banned; the answer's
`glossary.forbidden` report still checks the output for any case. A ban is on token
sequences, not whole words, so a longer word that starts with a banned term's tokens is
avoided too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from server.decoding.banned import BannedSequences
from server.engine.engine import SentenceJob
from server.engine.tokenizer import Tokenizer

BOUNDARY = "\u2581"  # sentencepiece's word-boundary mark, a piece of its own at times


def spellings(term: str) -> list[str]:
    """The surface forms of `term` whose encodings are banned (without duplicates)."""
    term = term.strip()
    if not term:
        return []
    cased = [term, term.lower(), term[:1].upper() + term[1:]]
    forms = [form for word in cased for form in (word, f" {word}")]
    return list(dict.fromkeys(forms))


def banned_sequences(tokenizer: Tokenizer, terms: Sequence[str]) -> BannedSequences | None:
    """The token sequences spelling `terms` in the target vocabulary; None when there are
    none (no terms, or only terms the vocabulary cannot spell: a sequence holding the
    unknown token would ban every unknown word)."""
    forms = [form for term in terms for form in spellings(term)]
    if not forms:
        return None
    encoded = tokenizer.encode(forms, add_eos=False)
    sequences: list[tuple[int, ...]] = []
    for ids in encoded:
        if not ids or tokenizer.unk_id in ids or tokenizer.eos_id in ids:
            continue
        sequences.append(tuple(ids))
        if len(ids) > 1 and tokenizer.pieces(ids[:1]) == [BOUNDARY]:
            sequences.append(tuple(ids[1:]))
    unique = tuple(dict.fromkeys(sequences))
    return BannedSequences(unique) if unique else None


def with_bans(tokenizer: Tokenizer, forbidden: Sequence[str],
              jobs: list[SentenceJob]) -> list[SentenceJob]:
    """`jobs`, each also carrying the bans of `forbidden` (a glossary's forbidden target
    terms); `jobs` unchanged when there is nothing to ban."""
    if not forbidden or not jobs:
        return jobs
    bans = banned_sequences(tokenizer, forbidden)
    if bans is None:
        return jobs
    return [replace(job, guides=(*job.guides, bans)) for job in jobs]


def bans_of(job: SentenceJob) -> tuple[BannedSequences, ...]:
    """The bans `job` carries, for jobs decoding the same text again (marker retries)."""
    return tuple(guide for guide in job.guides if isinstance(guide, BannedSequences))
