"""Glossary enforcement on real term pairs: term hit rate and BLEU with and without it.

    python -m benchmarks.quality.text.glossary --data ../shared/data [--quick]

Term pairs come from the medical-terms, finance and lexicon corpora (entries of 1-3
words a side whose two sides differ). Test sentences are those of the 7 domains' test
sets and the news, conversation and captions test sets whose source contains a term and
whose reference contains that term's target (the glossary agrees with the reference, as
in Dinu et al. 2019, "Training Neural Machine Translation to Apply Terminology
Constraints"). Each sentence gets a glossary of its matched pairs and is translated by its
domain's module (the backbone for the extra genres) three ways:

- `none`: no glossary;
- `protect`: every term is masked as `{N}`, and its target written back after translation;
- `inline`: every term is replaced by its target in the source, which the model copies.

As the server does: a sentence whose markers did not survive (`protect`) is translated
again run by run with the terms written in; `inline` first translates a sentence with terms
as written, and one whose output misses a target (or an inflection of it) again with the
targets written in, then run by run. Writes <out>/glossary.json and .md.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sacrebleu

from benchmarks.quality.text.pipeline import (
    environment,
    load_engine,
    sentence_bench_arguments,
    translate_documents,
)
from benchmarks.report_files import write_report
from server.decoding.search import SearchOptions
from server.engine.engine import Member
from server.textproc.document import build_document
from server.textproc.glossary import Glossary, build_glossary
from server.textproc.masking import TermMode

TERM_CORPORA = ("medical-terms", "finance", "lexicon")
DOMAINS = ("medical", "law", "it", "subtitles", "edu", "ted", "religion")
GENRES = ("news", "conversation", "captions")
_TERM = re.compile(r"^[^\W\d_]+(?:[ '-][^\W\d_]+){0,2}$")
# Function words: a term needs a word outside them ("on the" -> "Le" is no terminology).
STOPWORDS = frozenset("""a about above after again against all am an and any are as at be
because been before being below between both but by can could did do does doing down during
each few for from further had has have having he her here hers him his how i if in into is it
its itself just me more most my no nor not now of off on once only or other our out over own
same she should so some such than that the their them then there these they this those
through to too under until up very was we were what when where which while who whom why will
with would you your following new next first last one two""".split())


@dataclass(frozen=True)
class Case:
    source: str
    reference: str
    domain: str | None  # None: the plain backbone
    entries: tuple[tuple[str, str], ...]


def term_pairs(data: Path) -> dict[str, set[str]]:
    """lowercased source term -> its targets."""
    pairs: dict[str, set[str]] = {}
    for corpus in TERM_CORPORA:
        folder = data / "en-fr" / "extra" / corpus
        sources = (folder / "train.en").read_text().splitlines()
        targets = (folder / "train.fr").read_text().splitlines()
        for source, target in zip(sources, targets, strict=True):
            source, target = source.strip(), target.strip()
            if (len(source) >= 4 and _TERM.match(source) and _TERM.match(target)
                    and source.lower() != target.lower()
                    and any(w not in STOPWORDS for w in re.split(r"[ '-]", source.lower()))):
                pairs.setdefault(source.lower(), set()).add(target)
    return pairs


def test_sets(data: Path) -> list[tuple[str, str | None, str, str]]:
    """(test set, domain or None, source, reference)."""
    out: list[tuple[str, str | None, str, str]] = []
    folders: list[tuple[str | None, Path]] = [(d, data / "en-fr" / "domains" / d)
                                              for d in DOMAINS]
    folders += [(None, data / "en-fr" / "extra" / g) for g in GENRES]
    for domain, folder in folders:
        sources = (folder / "test.en").read_text().splitlines()
        references = (folder / "test.fr").read_text().splitlines()
        out += [(folder.name, domain, s, r) for s, r in zip(sources, references, strict=True)]
    return out


def find_cases(data: Path, *, limit: int, rng: random.Random) -> list[Case]:
    """At most limit / 10 sentences of each of the 10 test sets (seeded), so that news does
    not drown the domains. A glossary target is written as the reference spells it."""
    pairs = term_pairs(data)
    finder = re.compile(r"(?<!\w)(?:" + "|".join(
        re.escape(t) for t in sorted(pairs, key=len, reverse=True)) + r")(?!\w)", re.I)
    by_set: dict[str, list[Case]] = {}
    for name, domain, source, reference in test_sets(data):
        entries: dict[str, tuple[str, str]] = {}  # lowercased term -> (term, target)
        for match in finder.finditer(source):
            term = match.group(0)
            for target in sorted(pairs[term.lower()]):
                found = re.search(rf"(?<!\w){re.escape(target)}(?!\w)", reference, re.I)
                if found:  # a term met twice in other cases is one entry (case-insensitive)
                    entries.setdefault(term.lower(), (term, found.group(0)))
                    break
        if entries:
            by_set.setdefault(name, []).append(
                Case(source, reference, domain, tuple(entries.values())))
    cases: list[Case] = []
    for found_cases in by_set.values():
        rng.shuffle(found_cases)
        cases += found_cases[: max(1, limit // 10)]
    return cases


def evaluate(engine: Any, modules: dict[str, str], cases: Sequence[Case],
             options: SearchOptions, mode: TermMode | None) -> dict[str, Any]:
    glossaries: list[Glossary | None] = [
        build_glossary(c.entries, field="glossary", max_entries=100, max_term_chars=200)
        if mode else None for c in cases]
    documents = [build_document(c.source, glossary=g, terms=mode or "protect")
                 for c, g in zip(cases, glossaries, strict=True)]
    members = [[Member(modules[c.domain])] if c.domain in modules else [Member(None)]
               for c in cases]
    started = time.perf_counter()
    outcome = translate_documents(engine, documents, members, options)
    hits = total = 0
    for case, output in zip(cases, outcome.texts, strict=True):
        for _, target in case.entries:
            total += 1
            hits += target.lower() in output.lower()
    bleu = sacrebleu.corpus_bleu(outcome.texts, [[c.reference for c in cases]])
    return {"term_hit_rate": hits / max(total, 1), "terms": total, "bleu": round(bleu.score, 2),
            "retried_sentences": outcome.retried, "sentences": outcome.units,
            "seconds": round(time.perf_counter() - started, 1)}  # no sentences: the data stays out


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    cases = find_cases(args.data, limit=args.sentences, rng=rng)
    engine, modules = load_engine(args.store_dir)
    options = SearchOptions(beam_size=args.beam_size)
    modes: dict[str, TermMode | None] = {"none": None, "protect": "protect",
                                         "inline": "inline"}
    systems = {name: evaluate(engine, modules, cases, options, mode)
               for name, mode in modes.items()}
    return {"environment": environment(args.note), "beam_size": args.beam_size,
            "sentences": len(cases), "by_domain": {
                (d or "genres"): sum(c.domain == d for c in cases)
                for d in (*DOMAINS, None)}, "systems": systems}


def markdown(results: dict[str, Any]) -> str:
    env, systems = results["environment"], results["systems"]
    base = systems["none"]["bleu"]
    rows = "\n".join(
        f"| `{name}` | {100 * s['term_hit_rate']:.1f}% of {s['terms']} | {s['bleu']:.2f} | "
        f"{s['bleu'] - base:+.2f} | {s['retried_sentences']} |"
        for name, s in systems.items())
    return f"""# Glossary enforcement

{env['date']}, {env['machine']}; beam {results['beam_size']}; embedded default model;
{results['sentences']} test sentences that contain a term pair of the medical-terms,
finance or lexicon corpora whose target is in the reference ({results['by_domain']}).
{env['note']}

| system | target term in the output | BLEU | vs none | sentences translated again |
|---|---:|---:|---:|---:|
{rows}

Translated again: markers lost (`protect`: then run by run), or, `inline`, a target (or an
inflection of it) missing from the first pass on the source as written (then with the
targets written in, then run by run).
"""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    return sentence_bench_arguments(__doc__, argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    results = run(args)
    write_report(args.out, "glossary", results, markdown(results))


if __name__ == "__main__":
    main()
