"""Quality of the built-in default's adapters with low-precision weights (issue #23).

    python -m benchmarks.quality.precision.adapter_precision [--data DIR] [--sentences 200]
                                                             [--out DIR]

Each domain's served module is decoded on the first `--sentences` pairs of its test set
(greedy, batches as `make eval` plans them) three times: with its float32 weights as
stored, and with its weights as a lower-precision bank would hold them, computed in
float32 (the arithmetic of a kernel that widens stored weights on load):

    bfloat16   every tensor rounded to bfloat16 (8 bits of mantissa);
    int8       every matrix (`[layers, in, out]`) quantized symmetrically per output
               column of each layer, 127 levels (vectors: norms, biases stay float32);
    int8-engine  the engine's int8 banks (`EngineOptions.module_int8`): the same weights
               through the grouped int8 kernel (server/engine/int8_groups.py, float32
               rows); where it does not build, through fbgemm, whose activations are
               quantized per call too (-0.16 BLEU on one domain, run of 2026-11-25);
    bfloat16-engine  the engine's grouped adapters (`EngineOptions.module_bf16`): weights,
               biases and the matmuls' inputs and outputs in bfloat16 (float32 layer norm
               and residual).

Writes results/adapter_precision.{json,md}: BLEU per domain and variant, and whether each
low-precision variant stays within 0.1 BLEU of float32 on every domain and on average.
"""

from __future__ import annotations

import argparse
import datetime
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from benchmarks.quality.data import domain_set
from benchmarks.quality.decode import Decoder, DecodeSettings
from benchmarks.report_files import write_report
from benchmarks.sentence_runs import precision_benchmark_parser
from model_store import BUILTIN_DIR, Store
from server.engine.artifacts import build_engine, module_params
from server.engine.engine import Engine, EngineOptions, Member
from server.engine.families import Params
from trainer.training.evaluate import score

TOLERANCE = 0.1  # BLEU: the bound on the loss from low-precision weights
Variant = Callable[[Params], Params]


def to_bfloat16(params: Params) -> Params:
    """Every tensor rounded to bfloat16 and widened back."""
    return {name: tensor.to(torch.bfloat16).float() for name, tensor in params.items()}


def quantize_int8(matrix: Tensor) -> Tensor:
    """`[layers, in, out]` -> the same, each layer's columns quantized symmetrically to
    127 levels of their own scale (per output channel) and dequantized."""
    scale = matrix.abs().amax(dim=-2, keepdim=True).clamp_min(1e-12) / 127.0
    return torch.round(matrix / scale).clamp(-127, 127) * scale


def to_int8(params: Params) -> Params:
    """The matrices quantized per output channel; vectors (norms, biases) unchanged."""
    return {name: quantize_int8(tensor) if tensor.dim() == 3 else tensor
            for name, tensor in params.items()}


# Variants that are engines of their own, decoding the float32 module: name -> options.
ENGINE_VARIANTS: dict[str, EngineOptions] = {
    "int8-engine": EngineOptions(host_capacity=64, module_int8=True),
    "bfloat16-engine": EngineOptions(host_capacity=64, module_bf16=True)}
VARIANTS: dict[str, Variant] = {"float32": lambda params: dict(params),
                                "bfloat16": to_bfloat16, "int8": to_int8}


def register_variants(engine: Engine, store: Store, domains: Sequence[str]) -> dict[str, str]:
    """Register every domain's served module once per weight variant (`{domain}:{variant}`);
    returns domain -> family."""
    families: dict[str, str] = {}
    for domain in domains:
        loaded = store.load("module", domain)
        config = dict(loaded.manifest.config)
        families[domain] = str(config["family"])
        params = module_params(loaded.files)
        for variant, convert in VARIANTS.items():
            engine.register_module(f"{domain}:{variant}", config, convert(params))
    return families


def measure(data: Path, *, sentences: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="adapter-precision-") as root, \
            Store.open(Path(root), builtin_dir=BUILTIN_DIR) as store:
        loaded = store.load_default_backbone()
        engine = build_engine(loaded.files, EngineOptions(host_capacity=64))
        domains = sorted(store.active_domains())
        families = register_variants(engine, store, domains)
        settings = DecodeSettings(beam_size=1)
        decoders = {variant: Decoder(engine, label="adapter-precision", settings=settings,
                                     cache_dir=None) for variant in VARIANTS}
        for variant, options in ENGINE_VARIANTS.items():
            own = build_engine(loaded.files, options)
            register_variants(own, store, domains)
            decoders[variant] = Decoder(own, label=f"adapter-precision-{variant}",
                                        settings=settings, cache_dir=None)
        backbone = f"{loaded.manifest.name} v{loaded.manifest.version}"
    bleu: dict[str, dict[str, float]] = {variant: {} for variant in decoders}
    for domain in domains:
        dataset = domain_set(data, domain, limit=sentences)
        for variant, decoder in decoders.items():
            module = f"{domain}:{'float32' if variant in ENGINE_VARIANTS else variant}"
            members = [(Member(module),)] * len(dataset)
            decoded = decoder.run(f"{domain}:{variant}", dataset, members)
            bleu[variant][domain] = round(score(decoded.hypotheses, dataset.references).bleu, 2)
            print(f"{domain:10s} {variant:11s} BLEU {bleu[variant][domain]:6.2f}", flush=True)
    for variant in decoders:
        bleu[variant]["average"] = round(sum(bleu[variant][d] for d in domains) / len(domains), 2)
    return {"backbone": backbone, "families": families, "sentences": sentences,
            "decode": "greedy", "bleu": bleu, "verdicts": verdicts(bleu)}


def verdicts(bleu: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Per low-precision variant: its largest BLEU loss against float32 and whether every
    domain and the average stay within `TOLERANCE`."""
    reference = bleu["float32"]
    found: dict[str, dict[str, Any]] = {}
    for variant, scores in bleu.items():
        if variant == "float32":
            continue
        deltas = {name: round(scores[name] - reference[name], 2) for name in reference}
        worst = min(deltas.values())
        found[variant] = {"delta": deltas, "worst": worst, "within": worst >= -TOLERANCE}
    return found


def markdown(result: dict[str, Any], command: str) -> str:
    bleu = result["bleu"]
    names = list(bleu["float32"])
    lines = ["# Adapter weights in low precision: quality", "",
             f"Built-in default ({result['backbone']}, {sorted(set(result['families'].values()))}"
             f" modules), first {result['sentences']} test sentences per domain, "
             f"{result['decode']}; BLEU (sacrebleu). Command: `{command}`.", "",
             "| variant | " + " | ".join(names) + " |",
             "|---|" + "---:|" * len(names)]
    for variant, scores in bleu.items():
        lines.append(f"| {variant} | " + " | ".join(f"{scores[n]:.2f}" for n in names) + " |")
    lines += ["", f"| variant | worst change vs float32 | within {TOLERANCE} BLEU |",
              "|---|---:|---|"]
    for variant, verdict in result["verdicts"].items():
        lines.append(f"| {variant} | {verdict['worst']:+.2f} | "
                     f"{'yes' if verdict['within'] else '**no**'} |")
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    return precision_benchmark_parser("python -m benchmarks.quality.precision.adapter_precision",
                                      __doc__, sentences=200).parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    result = measure(args.data, sentences=args.sentences)
    result["started"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    command = (f"python -m benchmarks.quality.precision.adapter_precision --data {args.data} "
               f"--sentences {args.sentences} --threads {args.threads}")
    text = markdown(result, command)
    write_report(args.out, "adapter_precision", result, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
