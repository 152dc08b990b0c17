"""Retrieval during decoding on a GPU: target tokens/s with and without a memory, at batch
32 and batch 1 (the speed part of benchmarks/quality/memory_retrieval.py, its engine on
`--device`).

    python -m benchmarks.speed.gpu.retrieval_gpu --data DIR [--device cuda] [--dtype float16]
        [--beams 1,4] [--sentences 64] [--memory-pairs 0] [--repeats 2] [--out DIR]

`--data` holds `domains/medical/{train,test}.{en,fr}` (the en-fr data root, or a copy of
that one folder: gpu_serve_run.sh unpacks `.whl/medical.tar.xz` there). The memory is the
medical training pairs (`--memory-pairs`: the first N), the timed sentences the first
`--sentences` of its test set (a quarter of them at batch 1), decoded with the shipped
medical adapter and the server's default retrieval settings at each beam of `--beams`;
best of `--repeats` interleaved runs. On: every pair forced (the forced-pair cache emptied
first); cached: the same sentences again. Writes
<out>/memory_retrieval-speed-<device>.json and .md.
"""

from __future__ import annotations

import argparse
import datetime
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.locations import RESULTS_DIR
from benchmarks.quality.data import read_pairs
from benchmarks.quality.evaluation.evaluate import backbone_of
from benchmarks.quality.models import load_models
from benchmarks.quality.retrieval_runner import Runner, memory_of, speed
from benchmarks.report_files import write_report
from model_store import BUILTIN_DIR, Store
from server.core.memory_settings import RetrievalSettings
from server.engine.engine import EngineOptions
from trainer.recipes.directions import DIRECTIONS

TARGET = 0.6  # tokens/s with retrieval over without, at batch 32 and batch 1
DOMAIN = "medical"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.gpu.retrieval_gpu",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True,
                        help="holds domains/medical/ (or en-fr/domains/medical/)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"),
                        default="float16", help="on CUDA (the CPU runs float32)")
    parser.add_argument("--beams", default="1,4", help="beam sizes, comma-separated")
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--memory-pairs", type=int, default=0,
                        help="training pairs in the memory (0: all)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    return parser.parse_args(argv)


def device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(torch.device(device))} (CUDA {torch.version.cuda})"
    return device


def measure(args: argparse.Namespace) -> dict[str, Any]:
    direction = DIRECTIONS["en-fr"]
    data = args.data if (args.data / "domains").is_dir() else args.data / "en-fr"
    dtype = "float32" if args.device == "cpu" else args.dtype
    retrieval = RetrievalSettings()
    with tempfile.TemporaryDirectory(prefix="nmt-retrieval-") as scratch, \
            Store.open(Path(scratch), builtin_dir=BUILTIN_DIR) as store:
        models = load_models(store, backbone=backbone_of(store, direction), domains=[DOMAIN],
                             options=EngineOptions(device=args.device, dtype=dtype))
    if DOMAIN not in models.served:
        raise SystemExit(f"the shipped en-fr model serves no {DOMAIN!r} module")
    memory = memory_of(data, direction, DOMAIN, args.memory_pairs)
    pairs = read_pairs(data / "domains" / DOMAIN, "test", direction)[: args.sentences]
    rows: list[dict[str, Any]] = []
    for beam in sorted({int(b) for b in args.beams.split(",") if b.strip()}):
        runner = Runner(models, beam)
        rows += [{"beam": beam} | row
                 for row in speed(runner, models.served[DOMAIN].module_id, pairs, memory,
                                  retrieval, args.repeats)]
    return {"device": device_name(args.device), "dtype": dtype, "memory_pairs": len(memory),
            "repeats": args.repeats, "retrieval": retrieval.model_dump(), "speed": rows,
            "torch": torch.__version__, "target_ratio": TARGET,
            "finished_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Retrieval during decoding on {result['device']}: speed (en-fr)", "",
             f"{result['dtype']}; {DOMAIN} test sentences with the shipped {DOMAIN} adapter, "
             f"a memory of {result['memory_pairs']} {DOMAIN} training pairs, the server's "
             f"default retrieval settings; best of {result['repeats']} interleaved runs "
             "each. On: every pair forced (cache emptied first); cached: the same sentences "
             f"again. Target: on / off >= {TARGET} at batch 32 and batch 1.", "",
             "| beam | batch | sentences | tokens/s off | tokens/s on | ratio | tokens/s on, "
             "pairs cached | ratio |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['beam']} | {r['batch']} | {r['sentences']} | {r['tokens_per_s_off']} | "
              f"{r['tokens_per_s_on']} | {r['ratio']} | {r['tokens_per_s_warm']} | "
              f"{r['ratio_warm']} |" for r in result["speed"]]
    missed = [r for r in result["speed"] if r["ratio"] < TARGET]
    lines += ["", "Target met at every beam and batch." if not missed else
              "Target NOT met at " + ", ".join(f"beam {r['beam']} batch {r['batch']}"
                                              for r in missed) + "."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = measure(args)
    stem = f"memory_retrieval-speed-{torch.device(args.device).type}"
    paths = write_report(args.out, stem, result, markdown(result))
    print(markdown(result))
    print(f"wrote {paths[-1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
