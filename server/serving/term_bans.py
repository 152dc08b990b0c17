"""A glossary's forbidden target terms, banned during decoding: each term becomes the
target token sequences that spell it, and every sentence of the text carries them as a
`BannedSequences` guide (server/decoding/banned.py), so the search never completes one.

Which spellings are banned up front: the sentencepiece encoding of each term as written,
in lower case, capitalised (first letter upper) and upper case, each both as sentencepiece
writes it alone and after a space (a word boundary), without a leading word-boundary piece
when that is a piece of its own (the term glued to what precedes it), and as it is spelt
after an elided article or preposition (`l'`, `d'`, ...: French glues the next word to
the apostrophe, in pieces of its own). A ban is on token sequences, not whole words, so a
longer word that starts with a banned term's tokens is avoided too.

What these miss (another segmentation the model chose, another casing such as
"DownLoad") is caught after the search: `redo_jobs` finds a forbidden term in an output
(whole word, any case, also after an apostrophe, as the answer's `glossary.forbidden`
report checks it), bans the very tokens that spelt it and decodes that sentence again,
for at most `REDO_ROUNDS` rounds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from server.decoding.banned import BannedSequences
from server.decoding.search import Hypothesis
from server.engine.engine import SentenceJob
from server.engine.tokenizer import Tokenizer
from server.textproc.glossary import forbidden_pattern

BOUNDARY = "\u2581"  # sentencepiece's word-boundary mark, a piece of its own at times
ELISIONS = ("l'", "d'", "qu'", "n'", "s'", "j'", "c'", "m'", "t'", "l\u2019", "d\u2019")
REDO_ROUNDS = 3  # decodes again per sentence, each banning what the last one spelt


def spellings(term: str) -> list[str]:
    """The surface forms of `term` whose encodings are banned (without duplicates)."""
    term = term.strip()
    if not term:
        return []
    cased = [term, term.lower(), term[:1].upper() + term[1:], term.upper()]
    forms = [form for word in cased for form in (word, f" {word}")]
    return list(dict.fromkeys(forms))


def _elided(tokenizer: Tokenizer, terms: Sequence[str]) -> list[tuple[int, ...]]:
    """The tokens spelling each term right after an elision's apostrophe, where the
    encoding splits cleanly after it."""
    words = [w for term in terms if (w := term.strip())]
    forms = [(e + w, e) for w in dict.fromkeys(words + [w.lower() for w in words])
             for e in ELISIONS]
    out: list[tuple[int, ...]] = []
    for ids, (_, elision) in zip(tokenizer.encode([f for f, _ in forms], add_eos=False),
                                 forms, strict=True):
        spelt = ""
        for cut, piece in enumerate(tokenizer.pieces(ids)):
            spelt += piece.replace(BOUNDARY, "")
            if spelt == elision and cut + 1 < len(ids):
                out.append(tuple(ids[cut + 1:]))
                break
            if len(spelt) >= len(elision):
                break
    return out


def banned_sequences(tokenizer: Tokenizer, terms: Sequence[str]) -> BannedSequences | None:
    """The token sequences spelling `terms` in the target vocabulary; None when there are
    none (no terms, or only terms the vocabulary cannot spell: a sequence holding the
    unknown token would ban every unknown word)."""
    forms = [form for term in terms for form in spellings(term)]
    if not forms:
        return None
    encoded = [*map(tuple, tokenizer.encode(forms, add_eos=False)), *_elided(tokenizer, terms)]
    sequences: list[tuple[int, ...]] = []
    for ids in encoded:
        if not ids or tokenizer.unk_id in ids or tokenizer.eos_id in ids:
            continue
        sequences.append(ids)
        if len(ids) > 1 and tokenizer.pieces(ids[:1]) == [BOUNDARY]:
            sequences.append(ids[1:])
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


def spelt_sequences(tokenizer: Tokenizer, forbidden: Sequence[str],
                    tokens: Sequence[int]) -> list[tuple[int, ...]]:
    """The token runs of an output (`tokens`) that spell a forbidden term: every run
    covering a whole-word match, any case (as `forbidden_hits` finds them)."""
    if not forbidden or not tokens:
        return []
    starts: list[int] = []
    text = ""
    for piece in tokenizer.pieces(tokens):
        starts.append(len(text))
        text += piece.replace(BOUNDARY, " ")
    found: list[tuple[int, ...]] = []
    for match in forbidden_pattern(tuple(forbidden)).finditer(text):
        first = max(i for i, start in enumerate(starts) if start <= match.start())
        last = max(i for i, start in enumerate(starts) if start < match.end())
        found.append(tuple(tokens[first: last + 1]))
    return list(dict.fromkeys(found))


def redo_jobs(tokenizer: Tokenizer, forbidden: Sequence[Sequence[str]],
              jobs: Sequence[SentenceJob], hypotheses: Sequence[Sequence[Hypothesis]]
              ) -> list[tuple[int, SentenceJob]]:
    """(index, job to decode again) for every job whose best hypothesis spells one of its
    `forbidden` terms (per job) anyway: the job with those very tokens banned as well.
    Nothing when a job's spelling was banned already (its search could not avoid it)."""
    out: list[tuple[int, SentenceJob]] = []
    for index, (terms, job, found) in enumerate(zip(forbidden, jobs, hypotheses,
                                                   strict=True)):
        if not terms or not found:
            continue
        spelt = spelt_sequences(tokenizer, terms, found[0].tokens)
        held = [sequence for ban in bans_of(job) for sequence in ban.sequences]
        fresh = [sequence for sequence in spelt if sequence not in held]
        if not fresh:
            continue
        others = tuple(g for g in job.guides if not isinstance(g, BannedSequences))
        out.append((index, replace(job, guides=(*others, BannedSequences(
            tuple(dict.fromkeys([*held, *fresh])))))))
    return out


async def avoiding(tokenizer: Tokenizer, forbidden: Sequence[Sequence[str]],
                   jobs: Sequence[SentenceJob], hypotheses: list[list[Hypothesis]],
                   run: Callable[[list[SentenceJob]], Awaitable[list[list[Hypothesis]]]]
                   ) -> list[list[Hypothesis]]:
    """`hypotheses` of `jobs`, those that spelt a forbidden term (per job) decoded again
    by `run` with that spelling banned too, up to `REDO_ROUNDS` times."""
    if not any(forbidden):
        return hypotheses
    jobs, hypotheses = list(jobs), list(hypotheses)
    for _ in range(REDO_ROUNDS):
        redo = redo_jobs(tokenizer, forbidden, jobs, hypotheses)
        if not redo:
            break
        for (index, job), found in zip(redo, await run([job for _, job in redo]),
                                       strict=True):
            jobs[index], hypotheses[index] = job, found
    return hypotheses
