"""Quality of the built-in weights stored compactly: int8 with per-channel scales against
the float16 files (issue #43).

    python -m benchmarks.quality.precision.compact_weights [--data DIR] [--sentences 200]
        [--beam-size 4] [--builtin DIR] [--out DIR]

The active backbone of `--builtin` (its float16 files, as published before issue #43) is
built twice through the serving load path (server/engine/artifacts.py): from its files as
stored, and from the same files with the weights re-encoded as the publish stage now
ships them (server/engine/row_int8.py: the backbone's matrices and embeddings int8 per
row, each module's banks int8 per layer and output column, dequantized to float32 at
load). Each domain's first `--sentences` test pairs are decoded by the plain backbone and
by the domain's served module, on both. Writes results/compact_weights.{json,md}: BLEU
per domain, the artifact sizes, the backbone's load time (median of 5) and its float32
tensors in memory, and whether int8 stays within 0.1 BLEU of float16 on average.
"""

from __future__ import annotations

import datetime
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.host import current_host
from benchmarks.provenance import command_line
from benchmarks.quality.data import domain_set
from benchmarks.quality.decode import Decoder, DecodeSettings
from benchmarks.quality.precision.adapter_precision import TOLERANCE
from benchmarks.report_files import write_report
from benchmarks.sentence_runs import precision_benchmark_parser
from contract.artifacts import BACKBONE_WEIGHTS_FILE
from contract.tensors import tensors_from_bytes, tensors_to_bytes
from model_store import BUILTIN_DIR, Store
from server.engine.artifacts import backbone_parts, build_engine, module_files, module_params
from server.engine.engine import EngineOptions, Member
from server.engine.row_int8 import quantize_rows
from trainer.training.evaluate import score

STORAGES = ("float16", "int8")


def compact_backbone(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The backbone's files with its weights re-encoded as int8 rows."""
    tensors = tensors_from_bytes(files[BACKBONE_WEIGHTS_FILE])
    return {**files, BACKBONE_WEIGHTS_FILE: tensors_to_bytes(quantize_rows(tensors))}


def load_seconds(files: Mapping[str, bytes], rounds: int = 5) -> float:
    """Median time to turn the files into float32 tensors and tokenizers."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        backbone_parts(files)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


def measure(data: Path, builtin: Path, *, sentences: int, beam_size: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="compact-weights-") as root, \
            Store.open(Path(root), builtin_dir=builtin) as store:
        loaded = store.load_default_backbone()
        files = {"float16": dict(loaded.files), "int8": compact_backbone(loaded.files)}
        domains = sorted(store.active_domains())
        settings = DecodeSettings(beam_size=beam_size)
        decoders: dict[str, Decoder] = {}
        sizes: dict[str, dict[str, int]] = {storage: {} for storage in STORAGES}
        for storage in STORAGES:
            engine = build_engine(files[storage], EngineOptions(host_capacity=64))
            sizes[storage]["backbone"] = len(files[storage][BACKBONE_WEIGHTS_FILE])
            for domain in domains:
                module = store.load("module", domain)
                params = module_params(module.files)
                stored = (module_files(params, int8_rows=True) if storage == "int8"
                          else dict(module.files))
                sizes[storage][f"module {domain}"] = sum(len(b) for b in stored.values())
                engine.register_module(domain, dict(module.manifest.config),
                                       module_params(stored))
            decoders[storage] = Decoder(engine, label=f"compact-{storage}", settings=settings,
                                        cache_dir=None)
        backbone = f"{loaded.manifest.name} v{loaded.manifest.version}"
        load = {storage: load_seconds(files[storage]) for storage in STORAGES}
        memory = {storage: sum(t.numel() * t.element_size()
                               for t in backbone_parts(files[storage]).tensors.values())
                  for storage in STORAGES}
    bleu: dict[str, dict[str, float]] = {}
    for system in ("backbone", "module"):
        for storage in decoders:
            bleu[f"{system} {storage}"] = {}
        for domain in domains:
            dataset = domain_set(data, domain, limit=sentences)
            members = [(Member(domain if system == "module" else None),)] * len(dataset)
            for storage, decoder in decoders.items():
                decoded = decoder.run(f"{domain}:{system}:{storage}", dataset, members)
                value = round(score(decoded.hypotheses, dataset.references).bleu, 2)
                bleu[f"{system} {storage}"][domain] = value
                print(f"{domain:10s} {system:8s} {storage:7s} BLEU {value:6.2f}", flush=True)
    for scores in bleu.values():
        scores["average"] = round(sum(scores[d] for d in domains) / len(domains), 2)
    deltas = {system: {name: round(bleu[f"{system} int8"][name]
                                   - bleu[f"{system} float16"][name], 2)
                       for name in bleu[f"{system} float16"]}
              for system in ("backbone", "module")}
    return {"backbone": backbone, "sentences": sentences,
            "decode": "greedy" if beam_size == 1 else f"beam {beam_size}", "bleu": bleu,
            "int8_minus_float16": deltas,
            "within": all(abs(d["average"]) <= TOLERANCE for d in deltas.values()),
            "bytes": sizes, "load_seconds": load, "float32_tensor_bytes": memory,
            "host": current_host().as_dict()}


def markdown(result: dict[str, Any]) -> str:
    bleu = result["bleu"]
    names = list(next(iter(bleu.values())))
    lines = ["# Built-in weights stored compactly: int8 against float16", "",
             f"Built-in default ({result['backbone']}), first {result['sentences']} test "
             f"sentences per domain, {result['decode']}; BLEU (sacrebleu). float16: its files "
             "as stored; int8: the same weights re-encoded as the publish stage ships them "
             "and dequantized by the serving load path. `backbone`: the plain backbone; "
             "`module`: each domain's served adapter on it (int8: the adapter's banks int8 "
             "too).", "",
             "| system | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for system, scores in bleu.items():
        lines.append(f"| {system} | " + " | ".join(f"{scores[n]:.2f}" for n in names) + " |")
    for system, deltas in result["int8_minus_float16"].items():
        lines.append(f"| {system} int8 - float16 | "
                     + " | ".join(f"{deltas[n]:+.2f}" for n in names) + " |")
    verdict = "yes" if result["within"] else "**no**"
    lines += ["", f"Average within {TOLERANCE} BLEU of float16, for both systems: {verdict}.",
              "", "Load: the backbone's files to float32 tensors and tokenizers "
              "(`backbone_parts`, median of 5); in memory both are float32.", "",
              "| storage | backbone file | modules (7) | load | float32 tensors in memory |",
              "|---|---:|---:|---:|---:|"]
    for storage, sizes in result["bytes"].items():
        modules = sum(v for k, v in sizes.items() if k.startswith("module "))
        lines.append(f"| {storage} | {sizes['backbone'] / 1e6:.2f} MB | {modules / 1e6:.2f} MB"
                     f" | {result['load_seconds'][storage]:.3f} s"
                     f" | {result['float32_tensor_bytes'][storage] / 1e6:.1f} MB |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = precision_benchmark_parser("python -m benchmarks.quality.precision.compact_weights",
                                        __doc__, sentences=200)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--builtin", type=Path, default=BUILTIN_DIR,
                        help="the built-in directory whose float16 backbone is compared")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = measure(args.data, args.builtin, sentences=args.sentences,
                     beam_size=args.beam_size)
    result["started"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    result["command"] = command_line()
    text = markdown(result)
    write_report(args.out, "compact_weights", result, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
