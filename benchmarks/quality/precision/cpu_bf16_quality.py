"""Quality of the engine's bfloat16 CPU path against float32 (issue #51).

    python -m benchmarks.quality.precision.cpu_bf16_quality [--data DIR] [--sentences 100]
                                                            [--out DIR]

The built-in default's backbone is built twice, as `engine.cpu_path=float32` and
`engine.cpu_path=bfloat16` build it (server/engine/host_paths.py: the path `auto` takes on
CPUs with AMX-BF16): the backbone's and every adapter's weights and activations in
bfloat16, the output distribution in float32. Each domain's served module decodes the
first `--sentences` pairs of its test set (greedy, batches as `make eval` plans them) on
both. Writes results/cpu_bf16_quality.{json,md}: BLEU per domain and whether bfloat16
stays within 0.1 BLEU of float32 on every domain and on average (the issue's bound, as for
int8).

bfloat16 runs natively on CPUs with AVX512-BF16 (AMD EPYC Genoa, Intel Cooper Lake and
later) or AMX-BF16; elsewhere torch emulates it (same numbers, slowly).
"""

from __future__ import annotations

import argparse
import datetime
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.host import current_host
from benchmarks.provenance import command_line
from benchmarks.quality.data import domain_set
from benchmarks.quality.decode import Decoder, DecodeSettings
from benchmarks.quality.precision.adapter_precision import TOLERANCE, verdicts
from benchmarks.report_files import write_report
from benchmarks.sentence_runs import precision_benchmark_parser
from model_store import BUILTIN_DIR, Store
from server.engine.artifacts import build_engine, module_params
from server.engine.engine import EngineOptions, Member
from trainer.training.evaluate import score

PATHS = {"float32": EngineOptions(host_capacity=64),
         "bfloat16": EngineOptions(host_capacity=64, dtype="bfloat16")}


def measure(data: Path, *, sentences: int, beam_size: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cpu-bf16-") as root, \
            Store.open(Path(root), builtin_dir=BUILTIN_DIR) as store:
        loaded = store.load_default_backbone()
        domains = sorted(store.active_domains())
        settings = DecodeSettings(beam_size=beam_size)
        decoders: dict[str, Decoder] = {}
        families: dict[str, str] = {}
        for path, options in PATHS.items():
            engine = build_engine(loaded.files, options)
            for domain in domains:
                module = store.load("module", domain)
                config = dict(module.manifest.config)
                families[domain] = str(config["family"])
                engine.register_module(domain, config, module_params(module.files))
            decoders[path] = Decoder(engine, label=f"cpu-path-{path}", settings=settings,
                                     cache_dir=None)
        backbone = f"{loaded.manifest.name} v{loaded.manifest.version}"
    bleu: dict[str, dict[str, float]] = {path: {} for path in decoders}
    for domain in domains:
        dataset = domain_set(data, domain, limit=sentences)
        members = [(Member(domain),)] * len(dataset)
        for path, decoder in decoders.items():
            decoded = decoder.run(f"{domain}:{path}", dataset, members)
            bleu[path][domain] = round(score(decoded.hypotheses, dataset.references).bleu, 2)
            print(f"{domain:10s} {path:9s} BLEU {bleu[path][domain]:6.2f}", flush=True)
    for path in decoders:
        bleu[path]["average"] = round(sum(bleu[path][d] for d in domains) / len(domains), 2)
    return {"backbone": backbone, "families": families, "sentences": sentences,
            "decode": "greedy" if beam_size == 1 else f"beam {beam_size}", "bleu": bleu,
            "verdicts": verdicts(bleu), "host": current_host().as_dict()}


def markdown(result: dict[str, Any]) -> str:
    bleu = result["bleu"]
    names = list(bleu["float32"])
    verdict = result["verdicts"]["bfloat16"]
    lines = ["# The bfloat16 CPU path: quality against float32", "",
             f"Built-in default ({result['backbone']}, "
             f"{sorted(set(result['families'].values()))} modules), each domain's served "
             f"module, first {result['sentences']} test sentences per domain, "
             f"{result['decode']}; BLEU (sacrebleu). Host: {result['host']['label']}.", "",
             "| path | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for path, scores in bleu.items():
        lines.append(f"| {path} | " + " | ".join(f"{scores[n]:.2f}" for n in names) + " |")
    lines += ["", f"bfloat16 - float32, worst domain or average: {verdict['worst']:+.2f} BLEU; "
                  f"within {TOLERANCE} BLEU: {'yes' if verdict['within'] else '**no**'}."]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = precision_benchmark_parser("python -m benchmarks.quality.precision.cpu_bf16_quality",
                                        __doc__, sentences=100)
    parser.add_argument("--beam-size", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    result = measure(args.data, sentences=args.sentences, beam_size=args.beam_size)
    result["started"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    result["command"] = command_line()
    text = markdown(result)
    write_report(args.out, "cpu_bf16_quality", result, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
