"""A TBX termbase on real test sentences: term hit rate, forbidden-term rate,
do-not-translate terms kept, and BLEU, with and without the termbase.

    python -m benchmarks.quality.text.terminology --data ../shared/data [--quick]

The termbase is built from the data, then imported the way the server imports an upload
(server/serving/tbx.py reads the TBX 2019 file written here):

- concepts: the term pairs of the medical-terms, finance and lexicon corpora
  (benchmarks/quality/text/glossary.py, `term_pairs`). A source term's preferred target is
  the one of its targets most often found in the references of the test sentences that
  hold the term, written as they write it (ties: the first in sorted order); a term is
  kept only when that target is in at least 80% of those references (a curated
  termbase agrees with the texts it serves; a term the texts translate several ways is
  no terminology). Its other targets are deprecated (forbidden), unless one contains the
  other (`Début` / `Au début`) or they differ only in case;
- do-not-translate terms: names the reference keeps verbatim: a capitalized word of 4+
  letters, not the first of its sentence, that the reference holds unchanged and that is
  not part of a term the sentence holds.

Test sentences are those of the 7 domains' and 3 genres' test sets (at most 1/10 of the
total from each) holding a term whose preferred target is in their reference, or a
do-not-translate name. One termbase serves all of them (as a team's would), built from
the terms those sentences hold. Each sentence is translated by its domain's module (the
backbone for the genres), with no glossary and with the termbase (`inline`, the server's
mode).

- term hit rate: of the termbase's source terms found in the sentences, the share whose
  preferred target is in the output (any case);
- forbidden-term rate: the share of sentences whose output holds a forbidden target term
  of the termbase (whole words, any case; the references' own rate is given beside it:
  some forbidden terms are also ordinary words), also among the sentences that hold a
  term with forbidden targets (where the model could write one);
- do-not-translate kept: the share of do-not-translate names found in the output as
  written.

Forbidden terms are reported, not yet avoided by the search: the rate with the termbase
measures what enforcing the preferred terms alone does. Writes <out>/terminology.json/.md.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import sacrebleu

from benchmarks.quality.text.glossary import term_pairs, test_sets
from benchmarks.quality.text.pipeline import (
    environment,
    load_engine,
    sentence_bench_arguments,
    translate_documents,
)
from benchmarks.report_files import write_report
from server.decoding.search import SearchOptions
from server.engine.engine import Member
from server.serving.tbx import Terminology, read_tbx
from server.textproc.document import build_document
from server.textproc.glossary import Glossary, build_glossary, forbidden_hits

_NAME = re.compile(r"(?<=\S )([A-Z][a-z]{3,})(?!\w)")
SETS = 10  # test sets the sentences are drawn from
CONSISTENT = 0.8  # a term's preferred target is in at least this share of its references


@dataclass(frozen=True)
class Case:
    source: str
    reference: str
    domain: str | None  # None: the plain backbone
    terms: tuple[str, ...]  # lowercased source terms the sentence holds
    names: tuple[str, ...]  # do-not-translate names


def _finder(terms: Sequence[str]) -> re.Pattern[str]:
    longest = sorted(terms, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, longest)) + r")(?!\w)", re.I)


def _written(text: str, term: str) -> str | None:
    """`term` as `text` writes it (any case), or None."""
    found = re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.I)
    return found.group(0) if found else None


def _holds(text: str, term: str) -> bool:
    return _written(text, term) is not None


def choose(data: Path, *, limit: int, rng: random.Random
           ) -> tuple[list[Case], dict[str, tuple[str, list[str]]]]:
    """The cases, and per source term its (preferred, forbidden targets)."""
    pairs = term_pairs(data)
    finder = _finder(list(pairs))
    rows = test_sets(data)
    agree: dict[str, Counter[str]] = {}  # term -> its targets as the references write them
    holding: Counter[str] = Counter()  # term -> test sentences that hold it
    found: list[tuple[str, str | None, str, str, list[str]]] = []
    for name, domain, source, reference in rows:
        terms = list(dict.fromkeys(m.group(0).lower() for m in finder.finditer(source)))
        holding.update(terms)
        for term in terms:
            for target in sorted(pairs[term]):
                written = _written(reference, target)
                if written is not None:
                    agree.setdefault(term, Counter())[written] += 1
                    break
        found.append((name, domain, source, reference, terms))
    concepts: dict[str, tuple[str, list[str]]] = {}
    for term, counts in agree.items():
        preferred, count = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        if count < CONSISTENT * holding[term]:
            continue  # the texts translate it several ways: no terminology to enforce
        low = preferred.lower()
        forbidden = sorted(t for t in pairs[term] if low not in t.lower()
                           and t.lower() not in low)
        concepts[term] = (preferred, forbidden)
    by_set: dict[str, list[Case]] = {}
    for name, domain, source, reference, terms in found:
        held = tuple(t for t in terms if t in concepts)
        names = tuple(dict.fromkeys(n for n in _NAME.findall(source)
                                    if re.search(rf"(?<!\w){n}(?!\w)", reference)
                                    and not any(n.lower() in t for t in terms)))
        if any(_holds(reference, concepts[t][0]) for t in held) or names:
            by_set.setdefault(name, []).append(Case(source, reference, domain, held, names))
    cases: list[Case] = []
    for group in by_set.values():
        rng.shuffle(group)
        cases += group[: max(1, limit // SETS)]
    used = {t for c in cases for t in c.terms}
    return cases, {t: concepts[t] for t in sorted(used)}


def termbase(concepts: dict[str, tuple[str, list[str]]], names: Sequence[str]) -> bytes:
    """A TBX-Basic 2019 file: one concept per term (preferred + deprecated targets) and
    one per do-not-translate name (its French term is itself)."""
    def term(text: str, status: str) -> str:
        note = (f'<termNote type="administrativeStatus">{status}Term-admn-sts</termNote>'
                if status else "")
        return f"<termSec><term>{escape(text)}</term>{note}</termSec>"

    entries = []
    for number, (source, (preferred, forbidden)) in enumerate(concepts.items()):
        french = term(preferred, "preferred") + "".join(term(t, "deprecated")
                                                        for t in forbidden)
        entries.append(f'<conceptEntry id="c{number}"><langSec xml:lang="en">'
                       f"{term(source, '')}</langSec><langSec xml:lang=\"fr\">{french}"
                       "</langSec></conceptEntry>")
    for number, name in enumerate(names):
        entries.append(f'<conceptEntry id="n{number}"><langSec xml:lang="en">{term(name, "")}'
                       f'</langSec><langSec xml:lang="fr">{term(name, "")}</langSec>'
                       "</conceptEntry>")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<tbx xmlns="urn:iso:std:iso:30042:ed-2" '
            'type="TBX-Basic" style="dca" xml:lang="en"><tbxHeader><fileDesc><sourceDesc>'
            "<p>bench</p></sourceDesc></fileDesc></tbxHeader><text><body>"
            + "".join(entries) + "</body></text></tbx>\n").encode("utf-8")


def evaluate(engine: Any, modules: dict[str, str], cases: Sequence[Case],
             glossary: Glossary | None, terms: Terminology, options: SearchOptions,
             alternatives: dict[str, list[str]]) -> dict[str, Any]:
    documents = [build_document(c.source, glossary=glossary, terms="inline") for c in cases]
    members = [[Member(modules[c.domain])] if c.domain in modules else [Member(None)]
               for c in cases]
    started = time.perf_counter()
    outcome = translate_documents(engine, documents, members, options)
    preferred = {s.lower(): t for s, t in terms.entries}
    forbidden = tuple(terms.forbidden)
    hits = total = kept = names = with_forbidden = exposed = exposed_hits = 0
    for case, output in zip(cases, outcome.texts, strict=True):
        for term in case.terms:
            total += 1
            hits += preferred[term].lower() in output.lower()
        for name in case.names:
            names += 1
            kept += re.search(rf"(?<!\w){name}(?!\w)", output) is not None
        found = bool(forbidden_hits(forbidden, output))
        with_forbidden += found
        if any(alternatives.get(term) for term in case.terms):  # a term with forbidden ones
            exposed += 1
            exposed_hits += found
    bleu = sacrebleu.corpus_bleu(outcome.texts, [[c.reference for c in cases]])
    return {"term_hit_rate": round(hits / max(total, 1), 4), "terms": total,
            "forbidden_rate": round(with_forbidden / max(len(cases), 1), 4),
            "exposed_sentences": exposed,
            "exposed_forbidden_rate": round(exposed_hits / max(exposed, 1), 4),
            "dnt_kept_rate": round(kept / max(names, 1), 4), "dnt_terms": names,
            "bleu": round(bleu.score, 2), "retried_sentences": outcome.retried,
            "seconds": round(time.perf_counter() - started, 1),
            "examples": [{"source": c.source, "output": o, "reference": c.reference}
                         for c, o in list(zip(cases, outcome.texts, strict=True))[:4]]}


def run(args: argparse.Namespace) -> dict[str, Any]:
    cases, concepts = choose(args.data, limit=args.sentences, rng=random.Random(args.seed))
    names = sorted({n for c in cases for n in c.names})
    data = termbase(concepts, names)
    started = time.perf_counter()
    terms = read_tbx(data, source="en", target="fr")
    glossary = build_glossary(terms.entries, field="tbx", forbidden=terms.forbidden,
                              max_entries=100_000, max_term_chars=200)
    imported_s = time.perf_counter() - started
    engine, modules = load_engine(args.store_dir)
    options = SearchOptions(beam_size=args.beam_size)
    alternatives = {term: forbidden for term, (_, forbidden) in concepts.items()}
    systems = {name: evaluate(engine, modules, cases, chosen, terms, options, alternatives)
               for name, chosen in (("none", None), ("tbx", glossary))}
    references = sum(bool(forbidden_hits(tuple(terms.forbidden), c.reference))
                     for c in cases) / max(len(cases), 1)
    return {"environment": environment(args.note), "beam_size": args.beam_size,
            "sentences": len(cases), "termbase": {
                "concepts": len(concepts) + len(names), "entries": len(terms.entries),
                "forbidden": len(terms.forbidden), "do_not_translate": len(names),
                "tbx_bytes": len(data), "import_seconds": round(imported_s, 3)},
            "reference_forbidden_rate": round(references, 4), "systems": systems}


def markdown(results: dict[str, Any]) -> str:
    env, systems, base = results["environment"], results["systems"], results["termbase"]
    rows = "\n".join(
        f"| `{name}` | {100 * s['term_hit_rate']:.1f}% of {s['terms']} | "
        f"{100 * s['forbidden_rate']:.1f}% ({100 * s['exposed_forbidden_rate']:.1f}% of "
        f"{s['exposed_sentences']}) | {100 * s['dnt_kept_rate']:.1f}% of "
        f"{s['dnt_terms']} | {s['bleu']:.2f} | {s['bleu'] - systems['none']['bleu']:+.2f} |"
        for name, s in systems.items())
    return f"""# Terminology from TBX

{env['date']}, {env['machine']}; beam {results['beam_size']}; embedded default model;
{results['sentences']} test sentences; a TBX 2019 termbase built from the data
({base['concepts']} concepts: {base['entries']} entries, {base['forbidden']} forbidden
target terms, {base['do_not_translate']} do-not-translate names; imported in
{base['import_seconds']} s). Method: benchmarks/quality/text/terminology.py. {env['note']}

| system | preferred target in output | outputs with a forbidden term | DNT kept | BLEU | vs none |
|---|---:|---:|---:|---:|---:|
{rows}

In parentheses: among the sentences holding a term that has forbidden targets.
The references themselves hold a forbidden term in
{100 * results['reference_forbidden_rate']:.1f}% of the sentences (some are also
ordinary words). Forbidden terms are reported after translation, not yet avoided by the
search.
"""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    return sentence_bench_arguments(__doc__, argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    results = run(args)
    write_report(args.out, "terminology", results, markdown(results))


if __name__ == "__main__":
    main()
