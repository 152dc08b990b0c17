"""Markup and placeholders through the embedded default model: do they all come back?

    python -m benchmarks.quality.text.markup --data ../shared/data [--quick]

1. software-ui, the whole set (gettext catalogs, placeholders kept): every line is masked
   and restored with an identity "translation" (the mechanism, no model): the line must
   come back byte for byte, and the spans protected are counted by kind;
2. software-ui through the engine (the `it` domain's module), a seeded sample of lines that
   carry placeholders: the share of lines whose every placeholder comes back verbatim,
   with protection (the server's pipeline) and without it (the raw line translated);
3. HTML built from the domains' whole test sets (every test sentence, 7 to a page, in
   order: paragraphs, headings, list items, links with attributes, inline tags wrapping
   words, entities, comments, code, script): the number of pages whose every tag,
   attribute, entity and comment comes back in order, of markup tokens back, and how often
   the first pass kept every marker (the rest is retried run by run). Between the source's
   tokens the output may hold only the escapes of the model's own text (`&amp;`, `&lt;`,
   `&quot;`, `&#x27;`: a `&` or `<` it wrote, which must not become markup); they are
   counted.

Writes <out>/markup.json and markup.md.
"""

from __future__ import annotations

import argparse
import html
import random
import re
import time
from collections import Counter
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from benchmarks.quality.text.pipeline import (
    common_arguments,
    environment,
    load_engine,
    translate_documents,
    translate_texts,
)
from benchmarks.report_files import write_report
from server.decoding.search import SearchOptions
from server.engine.engine import Member
from server.textproc.document import build_document
from server.textproc.html import Attributes, translated_spans
from server.textproc.placeholders import find_spans

DOMAINS = ("medical", "law", "it", "subtitles", "edu", "ted", "religion")
KINDS = (("url", re.compile(r"^(?:https?|ftp)://|^www\.")), ("email", re.compile(r"@")),
         ("entity", re.compile(r"^&")), ("tag", re.compile(r"^<")),
         ("printf", re.compile(r"^%")), ("brace", re.compile(r"^\{")),
         ("variable", re.compile(r"^\$")), ("escape", re.compile(r"^\\")),
         ("number", re.compile(r"^\d")))


def kind_of(span: str) -> str:
    return next((name for name, pattern in KINDS if pattern.search(span)), "other")


def spans_of(text: str) -> list[str]:
    return [text[a:b] for a, b in find_spans(text)]


def all_back(source: str, output: str) -> bool:
    """Every protected span of the source appears in the output as often, verbatim."""
    return all(output.count(span) >= count for span, count in Counter(spans_of(source)).items())


def mechanism(lines: Sequence[str]) -> dict[str, Any]:
    """Mask and restore every line with an identity translation."""
    exact = 0
    kinds: Counter[str] = Counter()
    with_spans = 0
    for line in lines:
        document = build_document(line)
        restored = document.restore(document.sources())
        if document.render(document.finals(restored, [])) == line:
            exact += 1
        found = spans_of(line)
        with_spans += bool(found)
        kinds.update(kind_of(s) for s in found)
    return {"lines": len(lines), "lines_with_spans": with_spans, "exact": exact,
            "exact_share": exact / max(len(lines), 1), "spans_by_kind": dict(kinds)}


def placeholder_round_trip(engine: Any, module: str, lines: Sequence[str],
                           options: SearchOptions) -> dict[str, Any]:
    members = [[Member(module)]] * len(lines)
    started = time.perf_counter()
    raw = translate_texts(engine, lines, members, options)
    documents = [build_document(line) for line in lines]
    outcome = translate_documents(engine, documents, members, options)
    back_raw = sum(all_back(s, o) for s, o in zip(lines, raw, strict=True))
    back = sum(all_back(s, o) for s, o in zip(lines, outcome.texts, strict=True))
    spans = sum(len(spans_of(line)) for line in lines)
    return {"lines": len(lines), "spans": spans,
            "all_back_unprotected": back_raw / len(lines), "all_back": back / len(lines),
            "sentences": outcome.units, "first_pass_kept": 1 - outcome.retried /
            max(outcome.units, 1), "seconds": round(time.perf_counter() - started, 1),
            "examples": [{"source": s, "unprotected": r, "protected": o} for s, r, o in
                         list(zip(lines, raw, outcome.texts, strict=True))[:5]]}


class _Markup(HTMLParser):
    """Every non-text token of a document, as written (the round-trip check)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.tokens: list[str] = []
        self.values: list[str] = []  # the values translated like text

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or ""
        self.tokens.append(without_translated_values(raw, tag, attrs))
        self.values += [raw[start:end] for start, end, _ in translated_spans(raw, tag, attrs)]

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag: str) -> None:
        self.tokens.append(f"</{tag}>")

    def handle_entityref(self, name: str) -> None:
        self.tokens.append(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.tokens.append(f"&#{name};")

    def handle_comment(self, data: str) -> None:
        self.tokens.append(f"<!--{data}-->")


def without_translated_values(raw: str, tag: str, attrs: Attributes) -> str:
    """A start tag's text with the values translated like text (`alt`, `title`, ...) cut
    out: they change, every other byte must not."""
    out: list[str] = []
    cursor = 0
    for start, end, _ in translated_spans(raw, tag, attrs):
        out += [raw[cursor:start], "…"]
        cursor = end
    return "".join(out) + raw[cursor:]


def markup_tokens(document: str) -> list[str]:
    return _parsed(document).tokens


def translated_values(document: str) -> list[str]:
    return _parsed(document).values


def _parsed(document: str) -> _Markup:
    parser = _Markup()
    parser.feed(document)
    parser.close()
    return parser


TEXT_ESCAPES = frozenset({"&amp;", "&lt;", "&quot;", "&#x27;"})  # server/textproc/escaping.py


def markup_back(source: str, output: str) -> tuple[int, int]:
    """(source tokens found in the output in order, escapes of model text between them):
    all of them back when the first number is the source's token count."""
    wanted = markup_tokens(source)
    found = escapes = 0
    for token in markup_tokens(output):
        if found < len(wanted) and token == wanted[found]:
            found += 1
        elif token in TEXT_ESCAPES:
            escapes += 1
        else:
            break  # a token the source did not have: the rest is out of place
    return found, escapes


INLINE = (("<b>", "</b>"), ("<em>", "</em>"), ('<a href="https://example.org/doc?id=7&amp;'
                                              'lang=fr" title="Read more">', "</a>"),
          ('<span class="term">', "</span>"), ("<i>", "</i>"), ("<strong>", "</strong>"))


def wrap_words(sentence: str, rng: random.Random) -> str:
    """One inline tag around 1-3 words of the sentence (never at the very start)."""
    words = sentence.split(" ")
    if len(words) < 3:
        return sentence
    first = rng.randrange(1, len(words) - 1)
    last = min(len(words), first + rng.randint(1, 3))
    opening, closing = rng.choice(INLINE)
    return " ".join(words[:first] + [opening + " ".join(words[first:last]) + closing]
                    + words[last:])


def html_document(sentences: Sequence[str], rng: random.Random) -> str:
    """A page in the shape users send: title, heading, paragraphs, a list, code, script."""
    s = [wrap_words(x.replace("&", "&amp;").replace("<", "&lt;"), rng) for x in sentences]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{sentences[0][:40]}</title>\n"
            '<style>p { margin: 0 }</style></head>\n<body class="doc">\n'
            "<!-- generated for the markup benchmark -->\n"
            f'<h1 id="top">{s[0]}</h1>\n<p>{s[1]} {s[2]}&nbsp;&#8212; ok.</p>\n'
            f"<ul>\n  <li>{s[3]}</li>\n  <li>{s[4]}<br>{s[5]}</li>\n</ul>\n"
            f'<p><img src="figure.png" alt="{html.escape(sentences[6])}"></p>\n'
            '<form><input type="submit" value="Send the form"></form>\n'
            f'<p class="note">{s[6]} Run <code>make test</code> first.</p>\n'
            '<pre>  keep   this\n  verbatim</pre>\n'
            '<script>var x = "<b>not translated</b>";</script>\n</body></html>\n')


def page_sentences(data: Path, pages_per_domain: int | None) -> list[tuple[str, list[str]]]:
    """(domain, 7 consecutive test sentences) for every page: each domain's test set in
    order, all of it unless `pages_per_domain` caps it."""
    pages: list[tuple[str, list[str]]] = []
    for domain in DOMAINS:
        lines = (data / "en-fr" / "domains" / domain / "test.en").read_text().splitlines()
        own = [lines[start: start + 7] for start in range(0, len(lines) - 6, 7)]
        pages += [(domain, chunk) for chunk in own[:pages_per_domain]]
    return pages


def html_round_trip(engine: Any, modules: dict[str, str], data: Path,
                    pages_per_domain: int | None, options: SearchOptions,
                    rng: random.Random) -> dict[str, Any]:
    pages = page_sentences(data, pages_per_domain)
    documents = [html_document(lines, rng) for _, lines in pages]
    members = [[Member(modules[domain])] if domain in modules else [Member(None)]
               for domain, _ in pages]
    started = time.perf_counter()
    built = [build_document(d, fmt="html") for d in documents]
    outcome = translate_documents(engine, built, members, options)
    checked = [markup_back(s, o) for s, o in zip(documents, outcome.texts, strict=True)]
    wanted = [len(markup_tokens(s)) for s in documents]
    values = [(a, b) for s, o in zip(documents, outcome.texts, strict=True)
              for a, b in zip(translated_values(s), translated_values(o), strict=True)]
    complete = sum(found == total for (found, _), total in zip(checked, wanted, strict=True))
    failures = [{"source": s, "translation": o} for s, o, (found, _), total in
                zip(documents, outcome.texts, checked, wanted, strict=True) if found < total]
    return {"documents": len(documents), "sentences_in_pages": sum(len(x) for _, x in pages),
            "complete": complete, "all_markup_back": complete / max(len(documents), 1),
            "markup_tokens": sum(wanted), "markup_tokens_back": sum(f for f, _ in checked),
            "text_escapes": sum(e for _, e in checked), "attribute_values": len(values),
            "attribute_values_translated": sum(a != b for a, b in values),
            "sentences": outcome.units, "retried": outcome.retried,
            "first_pass_kept": 1 - outcome.retried / max(outcome.units, 1),
            "seconds": round(time.perf_counter() - started, 1), "failures": failures[:5],
            "example": {"source": documents[0], "translation": outcome.texts[0]}}


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    ui = (args.data / "en-fr" / "extra" / "software-ui" / "train.en").read_text().splitlines()
    engine, modules = load_engine(args.store_dir)
    options = SearchOptions(beam_size=args.beam_size)
    carriers = [line for line in ui if spans_of(line) and len(line) <= 200
                and any(c.isalpha() for c in line)]
    sample = rng.sample(carriers, min(args.lines, len(carriers)))
    return {"environment": environment(args.note), "beam_size": args.beam_size,
            "software_ui_mechanism": mechanism(ui),
            "software_ui_engine": placeholder_round_trip(engine, modules.get("it", ""),
                                                         sample, options),
            "html_engine": html_round_trip(engine, modules, args.data, args.pages, options,
                                           rng)}


def markdown(results: dict[str, Any]) -> str:
    env, mech = results["environment"], results["software_ui_mechanism"]
    ui, page = results["software_ui_engine"], results["html_engine"]
    kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(mech["spans_by_kind"].items(),
                                                      key=lambda kv: -kv[1]))
    rows = [
        ("software-ui, whole set, mask -> restore (no model)",
         f"{mech['lines']:,} lines ({mech['lines_with_spans']:,} with spans)",
         f"{100 * mech['exact_share']:.2f}% byte-identical", "-"),
        ("software-ui sample through `it`, unprotected",
         f"{ui['lines']} lines, {ui['spans']} spans", f"{100 * ui['all_back_unprotected']:.1f}%",
         "-"),
        ("software-ui sample through `it`, protected",
         f"{ui['lines']} lines, {ui['spans']} spans", f"{100 * ui['all_back']:.1f}%",
         f"{100 * ui['first_pass_kept']:.1f}% of {ui['sentences']} sentences"),
        ("HTML pages from the domains' test sentences",
         f"{page['documents']} pages ({page['sentences_in_pages']} test sentences), "
         f"{page['markup_tokens']:,} tags/entities/comments",
         f"{page['complete']} of {page['documents']} pages "
         f"({100 * page['all_markup_back']:.1f}%); {page['markup_tokens_back']:,} of "
         f"{page['markup_tokens']:,} tokens",
         f"{100 * page['first_pass_kept']:.1f}% of {page['sentences']} sentences")]
    table = "\n".join("| " + " | ".join(row) + " |" for row in rows)
    return f"""# Markup and placeholders round trip

{env['date']}, {env['machine']}; beam {results['beam_size']}; embedded default model.
{env['note']}

| test | items | every span/tag back | first pass kept the markers |
|---|---:|---:|---:|
{table}

Spans protected in the whole software-ui set: {kinds}.

Translated attribute values (`title`, `alt`, an input button's `value`):
{page['attribute_values_translated']} of {page['attribute_values']} changed.
In the HTML pages the model's own text needed {page['text_escapes']} escapes (a `&` or `<` it
wrote, written as `&amp;`/`&lt;` so that it stays text); {page['seconds']:.0f} s for the pages.

Sentences whose markers did not survive the first pass are translated again run by run
(the text between tags and placeholders, each on its own), so every span comes back; the
price is the translation quality of those sentences.
"""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(parser)
    parser.add_argument("--lines", type=int, default=1000,
                        help="software-ui lines translated by the engine")
    parser.add_argument("--pages", type=int, default=None,
                        help="HTML pages per domain (default: the whole test set, 28)")
    parser.add_argument("--quick", action="store_true",
                        help="100 lines, 2 pages per domain")
    parser.add_argument("--note", default="")
    args = parser.parse_args(argv)
    if args.quick:
        args.lines, args.pages = 100, 2
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    results = run(args)
    write_report(args.out, "markup", results, markdown(results))


if __name__ == "__main__":
    main()
