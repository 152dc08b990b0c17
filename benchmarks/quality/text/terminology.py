"""A TBX termbase per test sentence, built from the data and from what the model writes
without it: forbidden terms avoided, do-not-translate terms kept, preferred terms hit, and
BLEU, with and without the termbase.

    python -m benchmarks.quality.text.terminology --data ../shared/data [--quick]

Pool: 9/4 x `--sentences` test sentences (900; `--quick`: 135) of the 7 domains' and 3
genres' test sets: 8/9 hold a dictionary term with a target the reference does without
(within each set, the sentences with most such targets first), 1/9 hold only names; each
kind taken in turn from each set (seeded), so that news does not drown the domains. Each
is translated first without a termbase by its domain's module (the backbone for the
genres): the `none` system. Every sentence that then invites a forbidden or
do-not-translate term is kept, and `--sentences` / 4 of those with only preferred terms.

Dictionary: the term pairs of the medical-terms, finance and lexicon corpora
(benchmarks/quality/text/glossary.py, `term_pairs`). Each sentence's termbase (TBX 2019,
imported by the server's reader, server/serving/tbx.py) holds, per dictionary term of its
source:

- a preferred target: the term's dictionary target that the reference holds, written as
  the reference writes it (its inflection and case): a hit counts only when the output
  holds that form (whole word, any case);
- forbidden (deprecated) targets: the term's dictionary targets that the `none` output
  holds and the reference does not (the model's own choice, which the reference did
  without), unless one contains the other with a preferred target or a name (`Début` /
  `Au début`): each sentence holding one invites it, by construction;
- do-not-translate terms: names the reference keeps verbatim (a capitalized word of 4+
  letters, not the first of its sentence, not part of a dictionary term the sentence
  holds), as concepts marked `translate="no"`-style: the French term is the name itself.

The `tbx` system translates every sentence with a termbase again through the server's
pipeline (`inline`, the server's mode): its forbidden targets banned from the search
(server/serving/term_bans.py), the sentence as written first, then, if a preferred target
or a name is missing, with the targets written in and names masked, then run by run
(server/textproc/masking.py). Measured on the
sentences that invite each kind: the share of outputs with a forbidden term, of names
kept, of preferred forms hit; BLEU on all of them and on each part. Writes
<out>/terminology.json/.md; `--work DIR` (outside the repository: it holds data text) keeps
every sentence's termbase and outputs (cases.jsonl) and the `none` outputs, which a rerun
reuses.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
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
from server.serving.tbx import read_tbx
from server.textproc.document import build_document
from server.textproc.glossary import build_glossary, forbidden_hits

_NAME = re.compile(r"(?<=\S )([A-Z][a-z]{3,})(?!\w)")
POOL = 9 / 4  # sentences translated without a termbase, per --sentences


@dataclass(frozen=True)
class Row:
    source: str
    reference: str
    domain: str | None  # None: the plain backbone
    set_name: str


@dataclass(frozen=True)
class Case:
    row: Row
    baseline: str  # the `none` output
    preferred: tuple[tuple[str, str], ...]  # (source term, target as the reference writes it)
    forbidden: tuple[tuple[str, str], ...]  # (source term, target `none` wrote, the ref not)
    names: tuple[str, ...]  # do-not-translate names


def _finder(terms: Sequence[str]) -> re.Pattern[str]:
    longest = sorted(terms, key=len, reverse=True)
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, longest)) + r")(?!\w)", re.I)


def _written(text: str, term: str) -> str | None:
    """`term` as `text` writes it (any case, whole words), or None."""
    found = re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.I)
    return found.group(0) if found else None


def _names(row: Row, terms: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for n in _NAME.findall(row.source)
                               if re.search(rf"(?<!\w){n}(?!\w)", row.reference)
                               and not any(n.lower() in t for t in terms)))


def _open(row: Row, terms: Sequence[str], pairs: dict[str, set[str]]) -> int:
    """How many dictionary targets of `row`'s terms its reference does without: the
    forbidden terms the model may write."""
    return sum(_written(row.reference, t) is None for term in terms for t in pairs[term])


def pool(data: Path, pairs: dict[str, set[str]], *, size: int, rng: random.Random
         ) -> list[Row]:
    """`size` test sentences: 8/9 holding a dictionary term with a target the reference
    does without (most such targets first within each set: the most chances to invite
    a forbidden term), 1/9 holding only names; each kind taken in turn from each test set
    (each shuffled with `rng`)."""
    finder = _finder(list(pairs))
    inviting: dict[str, list[tuple[int, Row]]] = {}
    naming: dict[str, list[tuple[int, Row]]] = {}
    for name, domain, source, reference in test_sets(data):
        row = Row(source, reference, domain, name)
        terms = list(dict.fromkeys(m.group(0).lower() for m in finder.finditer(source)))
        chances = _open(row, terms, pairs)
        if chances:
            inviting.setdefault(name, []).append((chances, row))
        elif _names(row, terms):
            naming.setdefault(name, []).append((0, row))
    return _in_turn(inviting, size - size // 9, rng) + _in_turn(naming, size // 9, rng)


def _in_turn(by_set: dict[str, list[tuple[int, Row]]], size: int, rng: random.Random
             ) -> list[Row]:
    ordered: list[list[Row]] = []
    for rows in by_set.values():
        rng.shuffle(rows)
        ordered.append([row for _, row in sorted(rows, key=lambda cr: -cr[0])])
    chosen: list[Row] = []
    turn = 0
    while len(chosen) < size and any(turn < len(rows) for rows in ordered):
        chosen += [rows[turn] for rows in ordered if turn < len(rows)]
        turn += 1
    return chosen[:size]


def invitations(row: Row, baseline: str, pairs: dict[str, set[str]],
                finder: re.Pattern[str]) -> Case:
    """What `row`'s termbase holds, given the `none` output `baseline`."""
    terms = list(dict.fromkeys(m.group(0).lower() for m in finder.finditer(row.source)))
    names = _names(row, terms)
    preferred: dict[str, str] = {}
    for term in terms:
        for target in sorted(pairs[term]):
            written = _written(row.reference, target)
            if written is not None:
                preferred[term] = written
                break
    kept = [p.lower() for p in preferred.values()] + [n.lower() for n in names]
    forbidden: dict[tuple[str, str], None] = {}
    for term in terms:
        for target in sorted(pairs[term]):
            low = target.lower()
            if (_written(baseline, target) is not None and _written(row.reference, target) is None
                    and not any(low in k or k in low for k in kept)):
                forbidden[(term, target)] = None
    return Case(row, baseline, tuple(preferred.items()), tuple(forbidden), names)


def termbase(concepts: dict[str, tuple[str | None, list[str]]], names: Sequence[str]) -> bytes:
    """A TBX-Basic 2019 file: one concept per term (its preferred target, if any, and its
    deprecated ones) and one per do-not-translate name (its French term is itself)."""
    def term(text: str, status: str) -> str:
        note = (f'<termNote type="administrativeStatus">{status}Term-admn-sts</termNote>'
                if status else "")
        return f"<termSec><term>{escape(text)}</term>{note}</termSec>"

    entries = []
    for number, (source, (preferred, forbidden)) in enumerate(concepts.items()):
        french = (term(preferred, "preferred") if preferred else "") + "".join(
            term(t, "deprecated") for t in forbidden)
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


def case_termbase(case: Case) -> bytes:
    concepts: dict[str, tuple[str | None, list[str]]] = {}
    for source, target in case.preferred:
        concepts[source] = (target, [])
    for source, target in case.forbidden:
        concepts.setdefault(source, (None, []))[1].append(target)
    return termbase(concepts, case.names)


def _members(case: Case, modules: dict[str, str]) -> list[Member]:
    return [Member(modules[case.row.domain])] if case.row.domain in modules else [Member(None)]


def translate_with_termbases(engine: Any, modules: dict[str, str], cases: Sequence[Case],
                             options: SearchOptions) -> tuple[list[str], int, float]:
    """The `tbx` outputs, the sentences retried run by run, and the import seconds."""
    glossaries, banned, imported = [], [], 0.0
    for case in cases:
        started = time.perf_counter()
        terms = read_tbx(case_termbase(case), source="en", target="fr")
        glossaries.append(build_glossary(terms.entries, field="tbx", forbidden=terms.forbidden,
                                         max_entries=100_000, max_term_chars=200))
        imported += time.perf_counter() - started
        banned.append(tuple(terms.forbidden))
    documents = [build_document(c.row.source, glossary=g, terms="inline")
                 for c, g in zip(cases, glossaries, strict=True)]
    outcome = translate_documents(engine, documents, [_members(c, modules) for c in cases],
                                  options, banned)
    return outcome.texts, outcome.retried, imported


def measure(cases: Sequence[Case], outputs: Sequence[str]) -> dict[str, Any]:
    def bleu(chosen: Sequence[int]) -> float:
        score = sacrebleu.corpus_bleu([outputs[i] for i in chosen],
                                      [[cases[i].row.reference for i in chosen]])
        return round(score.score, 2)

    inviting = [i for i, c in enumerate(cases) if c.forbidden]
    naming = [i for i, c in enumerate(cases) if c.names]
    preferring = [i for i, c in enumerate(cases) if c.preferred]
    with_forbidden = sum(bool(forbidden_hits(tuple(t for _, t in cases[i].forbidden),
                                             outputs[i])) for i in inviting)
    names = [(n, outputs[i]) for i in naming for n in cases[i].names]
    kept = sum(re.search(rf"(?<!\w){n}(?!\w)", out) is not None for n, out in names)
    terms = [(t, outputs[i]) for i in preferring for _, t in cases[i].preferred]
    hits = sum(_written(out, t) is not None for t, out in terms)
    return {"forbidden_sentences": len(inviting),
            "forbidden_rate": round(with_forbidden / max(len(inviting), 1), 4),
            "dnt_sentences": len(naming), "dnt_terms": len(names),
            "dnt_kept_rate": round(kept / max(len(names), 1), 4),
            "dnt_sentences_all_kept": sum(
                all(re.search(rf"(?<!\w){n}(?!\w)", outputs[i]) for n in cases[i].names)
                for i in naming),
            "preferred_sentences": len(preferring), "terms": len(terms),
            "term_hit_rate": round(hits / max(len(terms), 1), 4),
            "bleu": bleu(range(len(cases))), "bleu_forbidden": bleu(inviting),
            "bleu_dnt": bleu(naming), "bleu_preferred": bleu(preferring)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    pairs = term_pairs(args.data)
    rows = pool(args.data, pairs, size=int(POOL * args.sentences), rng=random.Random(args.seed))
    engine, modules = load_engine(args.store_dir)
    options = SearchOptions(beam_size=args.beam_size)
    started = time.perf_counter()
    baseline = _baseline(args, engine, modules, rows, options)
    none_s = time.perf_counter() - started
    finder = _finder(list(pairs))
    found = [invitations(r, out, pairs, finder) for r, out in zip(rows, baseline, strict=True)]
    # every sentence inviting a forbidden or do-not-translate term; of those with only
    # preferred terms, the first --sentences / 4 (they are many, and cost the tbx run time)
    only_preferred = [c for c in found if c.preferred and not (c.forbidden or c.names)]
    cases = [c for c in found if c.forbidden or c.names or
             c in only_preferred[: args.sentences // 4]]
    started = time.perf_counter()
    outputs, retried, imported = translate_with_termbases(engine, modules, cases, options)
    tbx_s = time.perf_counter() - started
    if args.work is not None:
        _keep(args.work, cases, outputs)
    return {"environment": environment(args.note), "beam_size": args.beam_size,
            "pool": len(rows), "sentences": len(cases),
            "by_set": {name: sum(c.row.set_name == name for c in cases)
                       for name in dict.fromkeys(r.set_name for r in rows)},
            "termbases": {"preferred": sum(len(c.preferred) for c in cases),
                          "forbidden": sum(len(c.forbidden) for c in cases),
                          "do_not_translate": sum(len(c.names) for c in cases),
                          "import_seconds": round(imported, 3)},
            "reference_forbidden_rate": measure(cases, [c.row.reference for c in cases])[
                "forbidden_rate"],
            "systems": {"none": {**measure(cases, [c.baseline for c in cases]),
                                 "seconds": round(none_s, 1), "sentences_translated": len(rows)},
                        "tbx": {**measure(cases, outputs), "retried_sentences": retried,
                                "seconds": round(tbx_s, 1),
                                "sentences_translated": len(cases)}}}


def _baseline(args: argparse.Namespace, engine: Any, modules: dict[str, str],
              rows: Sequence[Row], options: SearchOptions) -> list[str]:
    """The `none` outputs; with `--work`, those of an earlier run at the same settings
    (stored there by source and domain) are reused, so that a rerun translates only the
    termbase side."""
    cache: dict[str, str] = {}
    path = (args.work / f"none-beam{args.beam_size}.jsonl") if args.work is not None else None
    if path is not None and path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            cache[f"{record['domain']}\t{record['source']}"] = record["none"]
    keys = [f"{r.domain}\t{r.source}" for r in rows]
    todo = [i for i, key in enumerate(keys) if key not in cache]
    if todo:
        fresh = translate_documents(engine, [build_document(rows[i].source) for i in todo],
                                    [_members(Case(rows[i], "", (), (), ()), modules)
                                     for i in todo], options).texts
        cache.update((keys[i], text) for i, text in zip(todo, fresh, strict=True))
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as out:
                for i, text in zip(todo, fresh, strict=True):
                    out.write(json.dumps({"domain": rows[i].domain, "source": rows[i].source,
                                          "none": text}, ensure_ascii=False) + "\n")
    return [cache[key] for key in keys]


def _keep(work: Path, cases: Sequence[Case], outputs: Sequence[str]) -> None:
    """Every sentence's termbase and outputs, one JSON line each, to read the misses
    (data text: keep `--work` outside the repository)."""
    work.mkdir(parents=True, exist_ok=True)
    with (work / "cases.jsonl").open("w", encoding="utf-8") as out:
        for case, output in zip(cases, outputs, strict=True):
            forbidden = [t for _, t in case.forbidden]
            out.write(json.dumps({
                "set": case.row.set_name, "domain": case.row.domain,
                "source": case.row.source, "reference": case.row.reference,
                "preferred": case.preferred, "forbidden": forbidden, "names": case.names,
                "none": case.baseline, "tbx": output,
                "forbidden_left": forbidden_hits(tuple(forbidden), output),
                "preferred_missed": [t for _, t in case.preferred
                                     if _written(output, t) is None],
                "names_lost": [n for n in case.names
                               if re.search(rf"(?<!\w){n}(?!\w)", output) is None]},
                ensure_ascii=False) + "\n")


HEADER = ("| system | outputs with a forbidden term | do-not-translate kept (sentences with all) "
          "| preferred form in output | BLEU, all (vs none) | BLEU, forbidden part "
          "| BLEU, DNT part | BLEU, preferred part |\n|---|---:|---:|---:|---:|---:|---:|---:|")


def markdown(results: dict[str, Any]) -> str:
    env, systems, base = results["environment"], results["systems"], results["termbases"]
    none = systems["none"]
    rows = "\n".join(
        f"| `{name}` | {100 * s['forbidden_rate']:.1f}% of {s['forbidden_sentences']} | "
        f"{100 * s['dnt_kept_rate']:.1f}% of {s['dnt_terms']} "
        f"({s['dnt_sentences_all_kept']} of {s['dnt_sentences']}) | "
        f"{100 * s['term_hit_rate']:.1f}% of {s['terms']} | {s['bleu']:.2f} "
        f"({s['bleu'] - none['bleu']:+.2f}) | {s['bleu_forbidden']:.2f} | {s['bleu_dnt']:.2f} | "
        f"{s['bleu_preferred']:.2f} |"
        for name, s in systems.items())
    return f"""# Terminology from TBX

{env['date']}, {env['machine']}; beam {results['beam_size']}; embedded default model;
a pool of {results['pool']} test sentences holding a dictionary term or a name, of which
{results['sentences']} get a termbase ({results['by_set']}): one TBX 2019 file per
sentence, {base['preferred']} preferred, {base['forbidden']} forbidden and
{base['do_not_translate']} do-not-translate terms in all, imported in
{base['import_seconds']} s. Method: benchmarks/quality/text/terminology.py. {env['note']}

{HEADER}
{rows}

A sentence invites a forbidden term when the `none` output holds a dictionary target of
one of its terms that the reference does without, so `none` writes one in 100% of them by
construction; the references hold one in {100 * results['reference_forbidden_rate']:.1f}%.
With the termbase, as the server does it: forbidden targets are banned from the search
(and a sentence that spells one anyway is decoded again with that spelling banned); each
sentence is first translated as written, and
{systems['tbx']['retried_sentences']} that missed a preferred target (or an inflection of
it) or a name as written were translated again with the targets written in and the names
masked, then, failing that, run by run.
"""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    return sentence_bench_arguments(__doc__, argv, extra=_work_argument)


def _work_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--work", type=Path, default=None,
                        help="a folder outside the repository: every sentence's termbase "
                             "and outputs (cases.jsonl), and the `none` outputs reused by "
                             "a rerun")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    results = run(args)
    write_report(args.out, "terminology", results, markdown(results))


if __name__ == "__main__":
    main()
