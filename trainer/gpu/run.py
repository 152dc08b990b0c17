"""The whole GPU run of issue #47 in one command, under a fixed wall-clock budget: unpack
the pack, train the backbone (bfloat16 autocast, large token batches), average its last
snapshots (window chosen on dev), train the 7 domain adapters against it, and write float16
shards of at most 16 MiB with a log to --out.

    python3 -m trainer.gpu.run --pack .gpu --out "$OUT" --minutes 8          # on the GPU
    python -m trainer.gpu.run --pack DIR --out DIR --tiny --minutes 0.5 --device cpu  # test

Out: backbone-NN.safetensors, adapters-NN.safetensors (tensor names `<domain>/<name>`),
run.json (shape, settings, loss curve, tokens/s, GPU, minutes, tokens seen, every choice
and the dev loss it was made on) and run.log. Only dev sets are read: the pack holds no
test set. `python -m trainer.gpu.restore` turns the output into the recipe's run dir and a
published built-in version (docs/GPU.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from contract.backbone import BackboneConfig
from server.engine.backbone import Backbone
from server.engine.families import get_family
from trainer.gpu.adapters import ADAPTER, AdapterSettings, train_adapters
from trainer.gpu.backbone import BackboneSettings, train_backbone
from trainer.gpu.batches import DeviceBatches, Specials
from trainer.gpu.packed import read_pack
from trainer.gpu.shape import CANDIDATES, CHOSEN, TODAY
from trainer.gpu.shards import RETURN_BYTES, RETURN_FILES, float16_bytes, shard_plan, write_shards
from trainer.gpu.steps import Clock
from trainer.training.sampling import CorpusSizes

log = logging.getLogger("trainer.gpu")

RUN_FILE = "run.json"
LOG_FILE = "run.log"
TINY = replace(TODAY, d_model=32, n_heads=2, d_ff=64, encoder_layers=2, decoder_layers=2)
ADAPTER_SHARE = 0.18  # of the budget, for the 7 adapters together
EXPORT_SHARE = 0.04  # kept for averaging's last scoring, shards and the log


def device_of(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()})"


def check_return_size(config: BackboneConfig, domains: int) -> dict[str, int]:
    """What the run will bring back, refused before training when a device call could not
    return it (files and bytes under $OUT)."""
    with torch.device("meta"):
        backbone = Backbone(config).state_dict()
    family = get_family(str(ADAPTER["family"]))
    adapter = family.initial(config, family.normalise(dict(ADAPTER)), torch.Generator())
    adapters = {f"{d}/{k}": v for d in range(domains) for k, v in adapter.items()}
    files = len(shard_plan(backbone)) + len(shard_plan(adapters)) + 2  # + run.json, run.log
    size = float16_bytes(backbone) + float16_bytes(adapters)
    if files > RETURN_FILES or size > RETURN_BYTES - 2**20:
        raise ValueError(f"this shape returns {files} files, {size / 2**20:.1f} MiB: a device "
                         f"call brings back at most {RETURN_FILES} files, "
                         f"{RETURN_BYTES / 2**20:.0f} MiB")
    return {"files": files, "float16_bytes": size}


def run(args: argparse.Namespace) -> dict[str, Any]:
    clock = Clock(device_of(args.device))
    device = clock.device
    budget = args.minutes * 60
    report: dict[str, Any] = {"device": describe_device(device), "torch": torch.__version__,
                              "budget_s": budget, "test_sets": "none: the pack holds dev sets "
                              "only, every choice here is made on them"}
    log.info("device %s, torch %s, budget %.0f s", report["device"], torch.__version__, budget)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    pack = read_pack(args.pack)
    info = pack.info
    config = TINY if args.tiny else CANDIDATES[args.shape]
    config = replace(config, src_vocab_size=info.vocab_size, tgt_vocab_size=info.vocab_size)
    report |= {"shape": args.shape if not args.tiny else "tiny", "config": config.to_dict(),
               "pack": {"direction": info.direction, "pairs": sum(info.pairs),
                        "corpora": dict(zip(info.names, info.pairs, strict=True)),
                        "temperature": info.temperature, "max_len": info.max_len,
                        "spm_sha256": info.spm_sha256},
               "returns": check_return_size(config, len(info.domains))}
    specials = Specials(pad=config.pad_id, start=config.decoder_start_id, eos=config.eos_id)
    train = DeviceBatches(pack.train, specials, device)
    dev = DeviceBatches(pack.dev, specials, device)
    report["unpack_s"] = round(clock.synced(), 1)
    log.info("unpacked %d training pairs (%d target tokens), %d dev pairs in %.1f s",
             len(train), train.target_tokens(), len(dev), report["unpack_s"])
    torch.manual_seed(1)
    model = Backbone(config).to(device)
    parameters = sum(p.numel() for p in model.parameters())
    report["parameters"] = parameters
    log.info("backbone %s: %.2fM parameters", report["shape"], parameters / 1e6)
    eager_forward = model.forward
    if args.compile:
        model.forward = torch.compile(model.forward, dynamic=True)  # type: ignore[method-assign]
    settings = BackboneSettings(max_tokens=args.max_tokens,
                                warmup_steps=10 if args.tiny else BackboneSettings.warmup_steps)
    backbone_end = budget * (1 - ADAPTER_SHARE - EXPORT_SHARE)
    result = train_backbone(model, train, dev, sizes=CorpusSizes(info.names, info.pairs),
                            temperature=info.temperature, settings=settings, clock=clock,
                            end_s=backbone_end)
    model.forward = eager_forward  # type: ignore[method-assign]
    report["backbone"] = result.as_dict() | {"settings": asdict(settings)}
    # the backbone's shards and log first: a failure among the adapters still returns it
    args.out.mkdir(parents=True, exist_ok=True)
    written = write_shards(model.state_dict(), args.out, "backbone")
    report["shards"] = [p.name for p in written]
    (args.out / RUN_FILE).write_text(json.dumps(report, indent=1))
    adapter_settings = AdapterSettings()
    adapters = train_adapters(model, pack, specials, device, settings=adapter_settings,
                              clock=clock, end_s=budget * (1 - EXPORT_SHARE))
    report["adapters"] = {d: summary for d, (_, summary) in adapters.items()}
    report["adapter_settings"] = asdict(adapter_settings) | {"config": ADAPTER}
    written += write_shards({f"{d}/{k}": v for d, (params, _) in adapters.items()
                             for k, v in params.items()}, args.out, "adapters")
    report["shards"] = [p.name for p in written]
    report["minutes"] = round(clock.synced() / 60, 2)
    if device.type == "cuda":
        report["max_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    (args.out / RUN_FILE).write_text(json.dumps(report, indent=1))
    return report


def summary_lines(report: dict[str, Any]) -> list[str]:
    backbone = report["backbone"]
    lines = [f"device: {report['device']}; shape {report['shape']} "
             f"({report['parameters'] / 1e6:.2f}M parameters); {report['minutes']} min in all",
             f"backbone: {backbone['steps']} steps, {backbone['epochs']} epochs, "
             f"{backbone['target_tokens'] / 1e6:.1f}M target tokens in {backbone['seconds']} s "
             f"({backbone['target_tokens_per_s']:,} tok/s); dev loss by averaging window "
             f"{backbone['averaging_dev_loss']}, chosen {backbone['chosen_window']}",
             "adapter   pairs  epochs  best  dev loss (backbone)  seconds"]
    for domain, a in report["adapters"].items():
        lines.append(f"{domain:<9} {a['pairs']:>5}  {a['epochs']:>6}  {a['best_epoch']:>4}  "
                     f"{a['dev_loss']:.3f} ({a['backbone_dev_loss']:.3f})  {a['seconds']:>7}")
    lines.append(f"shards: {', '.join(report['shards'])}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.gpu.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pack", type=Path, default=Path(".gpu"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=8.0,
                        help="wall-clock budget of the whole run, unpacking included")
    parser.add_argument("--shape", choices=sorted(CANDIDATES), default=CHOSEN)
    parser.add_argument("--tiny", action="store_true", help="a toy shape (the CPU test)")
    parser.add_argument("--device", default="auto", help="auto (cuda when there), cuda, cpu")
    parser.add_argument("--max-tokens", type=int, default=BackboneSettings.max_tokens,
                        help="padded source + target tokens per backbone batch")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the backbone's forward (off: its compile time "
                             "for every batch shape is not known to pay within 8 minutes)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    fmt = "%(asctime)s %(name)s %(message)s"
    logging.basicConfig(level=logging.INFO, format=fmt)
    # the run's own log file, whatever the root logger already does (pytest, say)
    handler = logging.FileHandler(args.out / LOG_FILE)
    handler.setFormatter(logging.Formatter(fmt))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        report = run(args)
        for line in summary_lines(report):
            log.info("%s", line)
    finally:
        log.removeHandler(handler)
        handler.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
