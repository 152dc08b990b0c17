"""The systems under test, each a `Runner`: beam size -> output length of every sentence.

Every runner decodes the same source batch to exactly `target_length` tokens: end of
sentence is forbidden before that length and decoding stops at it (Hugging Face
`min_new_tokens = max_new_tokens`, CTranslate2 `min_decoding_length =
max_decoding_length`, the engine `SearchOptions.min_length` = the job's `max_length`).
The runners return what each system really produced, counted from its outputs, so the
measurement can refuse a system that decoded fewer or more tokens.
"""

from __future__ import annotations

import atexit
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import MarianMTModel

from benchmarks.locations import REPO
from contract.backbone import BackboneConfig
from server.decoding.search import SearchOptions
from server.engine.engine import Engine, Member, SentenceJob
from server.engine.families import Params, get_family
from server.engine.families.mixing import EPSILON

Runner = Callable[[int], list[int]]  # beam size -> tokens produced per sentence


@dataclass(frozen=True)
class Workload:
    """The inputs every system decodes: model ids (EOS last) and the same as pieces."""

    sources: list[list[int]]
    vocab: list[str]
    target_length: int
    pad_id: int
    eos_id: int

    @property
    def pieces(self) -> list[list[str]]:
        return [[self.vocab[i] for i in ids] for ids in self.sources]

    @property
    def batch(self) -> int:
        return len(self.sources)


def hf_runner(model: MarianMTModel, work: Workload) -> Runner:
    """`MarianMTModel.generate` on the batch (no padding: all sources have one length)."""
    ids = torch.tensor(work.sources, dtype=torch.long)  # [batch, src_len]
    mask = torch.ones_like(ids)

    @torch.inference_mode()
    def run(beam_size: int) -> list[int]:
        # transformers' annotations reject MarianMTModel as `generate`'s self (mypy only).
        out = model.generate(  # type: ignore[misc]
            input_ids=ids, attention_mask=mask, num_beams=beam_size, do_sample=False,
            min_new_tokens=work.target_length, max_new_tokens=work.target_length,
            bad_words_ids=[[work.pad_id]], forced_eos_token_id=None, early_stopping=False)
        return [_hf_length(row[1:].tolist(), work) for row in out]  # [0] = decoder start

    return run


def _hf_length(tokens: list[int], work: Workload) -> int:
    """Tokens generated before EOS (padding only follows a finished sentence)."""
    if work.eos_id in tokens:
        tokens = tokens[: tokens.index(work.eos_id)]
    while tokens and tokens[-1] == work.pad_id:
        tokens.pop()
    return len(tokens)


def ct2_runner(model_dir: Path, work: Workload, *, compute_type: str, threads: int,
               device: str = "cpu") -> Runner:
    """A CTranslate2 `Translator` on `device` (CPU: `threads` intra-op threads), in a worker
    process of its own (see benchmarks/speed/engine/ct2_worker.py); it exits with this process."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.speed.engine.ct2_worker", str(model_dir), compute_type,
         str(threads), device], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=REPO)
    atexit.register(_stop_worker, worker)
    assert worker.stdin is not None and worker.stdout is not None
    stdin, stdout = worker.stdin, worker.stdout
    stdin.write(json.dumps({"pieces": work.pieces, "target_length": work.target_length}) + "\n")

    def run(beam_size: int) -> list[int]:
        stdin.write(json.dumps({"beam_size": beam_size}) + "\n")
        stdin.flush()
        answer = stdout.readline()
        if not answer:
            raise RuntimeError(f"the CTranslate2 worker ({compute_type}) exited with "
                               f"{worker.wait()}")
        lengths: list[int] = json.loads(answer)["lengths"]
        return lengths

    return run


def _stop_worker(worker: subprocess.Popen[str]) -> None:
    if worker.stdin is not None:
        worker.stdin.close()
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        worker.kill()


def engine_runner(engine: Engine, work: Workload, members: Sequence[Member]) -> Runner:
    """This engine; row `i` uses `members[i % len(members)]` (one member per row)."""
    jobs = [SentenceJob(ids, (members[row % len(members)],), work.target_length)
            for row, ids in enumerate(work.sources)]

    def run(beam_size: int) -> list[int]:
        options = SearchOptions(beam_size=beam_size, min_length=work.target_length)
        return [len(hyps[0].tokens) for hyps in engine.translate(jobs, options)]

    return run


def mixed_members(module_ids: Sequence[str], *, batch: int) -> list[Member]:
    """Contiguous blocks of rows per module (batch / len(module_ids) rows each)."""
    per_module = max(1, batch // len(module_ids))
    return [Member(module_ids[min(row // per_module, len(module_ids) - 1)])
            for row in range(batch)]


def random_adapter(backbone: BackboneConfig, *, bottleneck: int, seed: int,
                   std: float = 0.02) -> tuple[dict[str, Any], Params]:
    """A residual adapter with random non-zero weights (a fresh one is the identity,
    whose `up` matmul would still run; random weights make the cost unmistakably real)."""
    family = get_family("adapter")
    config = family.normalise({"family": "adapter", "bottleneck": bottleneck})
    generator = torch.Generator().manual_seed(seed)
    fresh = family.initial(backbone, config, generator)
    params = {name: (tensor if name.endswith("norm_w") else
                     torch.randn(tensor.shape, generator=generator) * std)
              for name, tensor in fresh.items()}
    return config, params


def register_adapters(engine: Engine, count: int, *, bottleneck: int) -> list[str]:
    """Register `count` random adapters named adapter-0.. and return their ids."""
    ids = [f"adapter-{index}" for index in range(count)]
    for index, module_id in enumerate(ids):
        config, params = random_adapter(engine.config, bottleneck=bottleneck, seed=100 + index)
        engine.register_module(module_id, config, params)
    return ids


def random_override(engine: Engine, family_name: str, *, seed: int, std: float = 0.01,
                    **options: Any) -> tuple[dict[str, Any], Params]:
    """A module of a weight-override family ("sf", "pa", "mixing"): the fresh module (copies
    of the engine backbone's projections) plus small noise, so that it is neither the
    backbone nor a no-op, like a trained module near the backbone. The mixing family's
    smoothing constant stays as it is (it is never trained). `engine` must be a float one:
    an int8 engine holds no plain projection weights to copy."""
    family = get_family(family_name)
    config = family.normalise({"family": family_name, **options})
    generator = torch.Generator().manual_seed(seed)
    fresh = family.initial(engine.config, config, generator,
                           weights=engine.model.state_dict())
    params = {name: (tensor if name == EPSILON else
                     tensor + torch.randn(tensor.shape, generator=generator) * std)
              for name, tensor in fresh.items()}
    return config, params


def register_override(engine: Engine, family_name: str, *, seed: int, name: str = "",
                      **options: Any) -> str:
    """Register one `random_override` module named `name` (default `{family}-0`) and
    return its id."""
    module_id = name or f"{family_name}-0"
    config, params = random_override(engine, family_name, seed=seed, **options)
    engine.register_module(module_id, config, params)
    return module_id
