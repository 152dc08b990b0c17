"""The server's text pipeline on an engine, without HTTP: what
`server/serving/translation.py` does per request (mask -> translate -> restore -> retry
lost markers run by run -> render), for many documents in batches. Shared by the text
benchmarks (markup, glossary) and the router's."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.locations import REPO
from model_store import BUILTIN_DIR, Store
from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine, module_params
from server.engine.engine import Engine, EngineOptions, Member, SentenceJob
from server.serving.state import ModuleRef
from server.serving.term_bans import REDO_ROUNDS, redo_jobs, with_bans
from server.textproc.document import Document

BATCH = 32


@dataclass
class Outcome:
    texts: list[str]  # rendered translations, one per document
    units: int  # sentences sent to the engine
    retried: int  # sentences whose markers were lost (translated again run by run)


def load_engine(store_dir: Path) -> tuple[Engine, dict[str, str]]:
    """The embedded default backbone with every active domain module registered; returns
    the engine and domain -> engine module id."""
    store = Store.open(store_dir, builtin_dir=BUILTIN_DIR)
    try:
        loaded = store.load_default_backbone()
        engine = build_engine(loaded.files, EngineOptions())
        modules: dict[str, str] = {}
        for name, version in store.active_domains().items():
            module = store.load("module", name, version,
                                expected_fingerprint=loaded.manifest.backbone_fingerprint)
            key = ModuleRef(name, version).key
            engine.register_module(key, dict(module.manifest.config), module_params(module.files))
            modules[name] = key
        return engine, modules
    finally:
        store.close()


def translate_texts(engine: Engine, texts: Sequence[str], members: Sequence[Sequence[Member]],
                    options: SearchOptions,
                    forbidden: Sequence[Sequence[str]] | None = None) -> list[str]:
    """Best translation of every text with its own members, in batches; `forbidden`: per
    text, target terms banned from the search (as the server bans a glossary's)."""
    out: list[str] = []
    ids = engine.source_tokenizer.encode(list(texts)) if texts else []
    banned = forbidden if forbidden is not None else [()] * len(ids)
    for start in range(0, len(ids), BATCH):
        jobs = [with_bans(engine.target_tokenizer, terms, [SentenceJob(
                    source[: engine.config.max_positions], tuple(chosen) or (Member(None),),
                    engine.max_length(len(source)))])[0]
                for source, chosen, terms in zip(ids[start: start + BATCH],
                                                 members[start: start + BATCH],
                                                 banned[start: start + BATCH], strict=True)]
        found = engine.translate(jobs, options)
        terms = banned[start: start + BATCH]
        for _ in range(REDO_ROUNDS):  # forbidden terms spelt in a way the bans missed
            redo = redo_jobs(engine.target_tokenizer, terms, jobs, found)
            if not redo:
                break
            again = engine.translate([job for _, job in redo], options)
            for (index, job), hypotheses in zip(redo, again, strict=True):
                jobs[index], found[index] = job, hypotheses
        out += [engine.target_tokenizer.decode(h[0].tokens) if h else "" for h in found]
    return out


def translate_documents(engine: Engine, documents: Sequence[Document],
                        members: Sequence[Sequence[Member]], options: SearchOptions,
                        forbidden: Sequence[Sequence[str]] | None = None) -> Outcome:
    """`forbidden`: per document, target terms banned from every one of its sentences."""
    banned = forbidden if forbidden is not None else [()] * len(documents)
    sources = [doc.sources() for doc in documents]
    flat = [s for own in sources for s in own]
    flat_members = [m for own, m in zip(sources, members, strict=True) for _ in own]
    flat_banned = [b for own, b in zip(sources, banned, strict=True) for _ in own]
    outputs = _split(translate_texts(engine, flat, flat_members, options, flat_banned),
                     sources)
    restored = [doc.restore(out) for doc, out in zip(documents, outputs, strict=True)]
    retry = [doc.retry_texts(done) for doc, done in zip(documents, restored, strict=True)]
    retry_members = [m for own, m in zip(retry, members, strict=True) for _ in own]
    retry_banned = [b for own, b in zip(retry, banned, strict=True) for _ in own]
    retried = _split(translate_texts(engine, [t for own in retry for t in own],
                                     retry_members, options, retry_banned), retry)
    texts = [doc.render(doc.finals(done, again))
             for doc, done, again in zip(documents, restored, retried, strict=True)]
    lost = sum(done.count(None) for done in restored)
    return Outcome(texts, len(flat), lost)


def _split(flat: list[str], shape: Sequence[Sequence[Any]]) -> list[list[str]]:
    out: list[list[str]] = []
    cursor = 0
    for own in shape:
        out.append(flat[cursor: cursor + len(own)])
        cursor += len(own)
    return out


def environment(note: str) -> dict[str, Any]:
    return {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "note": note}


def common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--store-dir", type=Path, default=REPO / "benchmarks" / "results" /
                        "tmp" / "quality-store", help="writable root layered over the "
                                                  "built-in default model")
    parser.add_argument("--beam-size", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)


def sentence_bench_arguments(description: str | None, argv: Sequence[str] | None,
                             extra: Callable[[argparse.ArgumentParser], None] | None = None
                             ) -> argparse.Namespace:
    """The options of a bench over `--sentences` test sentences (400; `--quick`: 60)."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(parser)
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="60 sentences")
    parser.add_argument("--note", default="")
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.sentences = 60
    return args
