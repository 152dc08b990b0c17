"""The model's own view of a translation it produced: one teacher-forced pass of
(source, chosen output) through the same backbone and module slot, after decoding.

Why a separate pass and not state threaded through the beam search: the search stays
untouched (and free to change), and one decoder pass over the whole target costs little
beside a beam search that ran the decoder once per target position on `beam` rows.

For every sentence it gives the log-probability of each output token (EOS included), the
entropy of each step's distribution, and the cross-attention of every target position
over the source (the mean over the decoder's layers and heads). An ensemble's sentence is
scored by its heaviest member (one slot per row keeps the pass one batched call).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from server.engine.backbone import Backbone
from server.engine.engine import Engine, SentenceJob
from server.engine.hooks import Linear, ModuleHooks, Project, Side
from server.engine.residency import Lease
from server.engine.slots import BatchHooks, ModuleBank, runs_of

# Logit elements a chunk may hold ([rows, target, vocab] float32): bounds the pass's memory
# whatever a request's size (32M floats = 128 MB).
MAX_LOGIT_ELEMENTS = 32_000_000


@dataclass(frozen=True)
class Signals:
    """What the scoring pass saw for one sentence."""

    token_log_probs: list[float]  # per output token, EOS last
    token_entropies: list[float]  # entropy (nats) of each step's distribution
    coverage: list[float]  # per source token (EOS excluded): attention mass received
    attention_entropy: float  # mean over target positions, normalised by log(source len)


class CrossAttentionProbe:
    """`ModuleHooks` around a batch's own hooks (or none) that records the queries and
    keys of every decoder layer's cross-attention as the layer computes them."""

    def __init__(self, inner: ModuleHooks | None) -> None:
        self.inner = inner
        self.queries: dict[int, Tensor] = {}  # layer -> [rows, tgt_len, d]
        self.keys: dict[int, Tensor] = {}  # layer -> [rows, src_len, d]

    @property
    def needs_layer_states(self) -> bool:
        return self.inner is not None and self.inner.needs_layer_states

    def embed(self, side: Side, ids: Tensor, embedded: Tensor) -> Tensor:
        return embedded if self.inner is None else self.inner.embed(side, ids, embedded)

    def after_layer(self, side: Side, index: int, hidden: Tensor) -> Tensor:
        return hidden if self.inner is None else self.inner.after_layer(side, index, hidden)

    def after_stack(self, side: Side, hidden: Tensor, states: list[Tensor]) -> Tensor:
        return hidden if self.inner is None else self.inner.after_stack(side, hidden, states)

    def projections(self, side: Side, index: int) -> Project | None:
        own = self.inner.projections(side, index) if self.inner is not None else None
        if side != "decoder":
            return own

        def project(name: str, x: Tensor, linear: Linear) -> Tensor:
            out = own(name, x, linear) if own is not None else linear(x)
            if name == "cross_attn.q":
                self.queries[index] = out
            elif name == "cross_attn.k":
                self.keys[index] = out
            return out

        return project


@torch.inference_mode()
def score(engine: Engine, jobs: Sequence[SentenceJob],
          outputs: Sequence[list[int]]) -> list[Signals]:
    """Signals of `outputs[i]` (target ids, no start token, no EOS) as the translation of
    `jobs[i]`, under the job's heaviest member. Runs on the engine thread."""
    if len(jobs) != len(outputs):
        raise ValueError(f"{len(jobs)} jobs but {len(outputs)} outputs")
    if not jobs:
        return []
    heaviest = [max(job.members, key=lambda m: m.weight).module_id for job in jobs]
    lease = engine.modules.acquire([m for m in heaviest if m is not None])
    try:
        found: list[Signals | None] = [None] * len(jobs)
        for chunk in _chunks(jobs, outputs, engine.config.tgt_vocab_size):
            keys = [_row_key(lease, heaviest[i]) for i in chunk]
            order = sorted(range(len(chunk)), key=lambda r: _sort_key(keys[r]))
            rows = [chunk[r] for r in order]
            signals = _score_rows(engine, [jobs[i].source_ids for i in rows],
                                  [outputs[i] for i in rows], [keys[r] for r in order])
            for index, signal in zip(rows, signals, strict=True):
                found[index] = signal
    finally:
        engine.modules.release(lease)
    return [s for s in found if s is not None]


def _chunks(jobs: Sequence[SentenceJob], outputs: Sequence[list[int]],
            vocab: int) -> list[list[int]]:
    """Job indices in runs whose padded logits stay under MAX_LOGIT_ELEMENTS."""
    chunks: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index, output in enumerate(outputs):
        length = len(output) + 1
        grown = max(longest, length)
        if current and (len(current) + 1) * grown * vocab > MAX_LOGIT_ELEMENTS:
            chunks.append(current)
            current, grown = [], length
        current.append(index)
        longest = grown
    if current:
        chunks.append(current)
    return chunks


def _row_key(lease: Lease, module_id: str | None) -> tuple[ModuleBank | None, int]:
    if module_id is None:
        return (None, -1)
    ref = lease.refs[module_id]
    return (ref.bank, ref.slot)


def _sort_key(key: tuple[ModuleBank | None, int]) -> tuple[int, int]:
    """Rows of one (bank, slot) contiguous: each module runs once per run of rows."""
    bank, slot = key
    return (-1 if bank is None else id(bank), slot)


def _score_rows(engine: Engine, sources: list[list[int]], outputs: list[list[int]],
                keys: list[tuple[ModuleBank | None, int]]) -> list[Signals]:
    config = engine.config
    model: Backbone = engine.model
    device = engine.device
    runs = runs_of(keys)
    inner = BatchHooks(runs) if any(run.bank is not None for run in runs) else None
    probe = CrossAttentionProbe(inner)
    source = _pad(sources, config.pad_id).to(device)  # [rows, src_len]
    target_in = _pad([[config.decoder_start_id, *o] for o in outputs], config.pad_id).to(device)
    memory, mask = model.encode(source, probe)  # [rows, src_len, d], [rows, 1, 1, src_len]
    hidden = model.decode(target_in, memory, mask, probe)  # [rows, tgt_len, d]
    log_probs = torch.log_softmax(engine.project(hidden).float(), dim=-1)  # [rows, tgt, V]
    gold = _pad([[*o, config.eos_id] for o in outputs], config.pad_id).to(device)
    token_lp = log_probs.gather(-1, gold[:, :, None])[:, :, 0]  # [rows, tgt_len]
    entropy = -(log_probs.exp() * log_probs).sum(-1)  # [rows, tgt_len]
    attention = _cross_attention(probe, mask, config.n_heads)  # [rows, tgt_len, src_len]
    out: list[Signals] = []
    for row, (src, tgt) in enumerate(zip(sources, outputs, strict=True)):
        steps = len(tgt) + 1
        weights = attention[row, :steps, : len(src)]  # [steps, src]
        words = len(src) - 1 if config.source_eos and len(src) > 1 else len(src)
        covered = weights[:, :words].sum(0)
        spread = -(weights.clamp_min(1e-9).log() * weights).sum(-1).mean()
        out.append(Signals(token_lp[row, :steps].tolist(), entropy[row, :steps].tolist(),
                           covered.tolist(),
                           float(spread) / math.log(len(src)) if len(src) > 1 else 0.0))
    return out


def _cross_attention(probe: CrossAttentionProbe, mask: Tensor, heads: int) -> Tensor:
    """softmax(q k^T / sqrt(d_head)) over the source, averaged over layers and heads."""
    total: Tensor | None = None
    for layer, queries in probe.queries.items():
        keys = probe.keys[layer]
        rows, tgt_len, d_model = queries.shape
        q = queries.float().view(rows, tgt_len, heads, -1).transpose(1, 2)
        k = keys.float().view(rows, keys.shape[1], heads, -1).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
        scores = scores.masked_fill(~mask, -float("inf"))  # [rows, heads, tgt, src]
        probs = torch.softmax(scores, dim=-1).mean(1)
        total = probs if total is None else total + probs
    assert total is not None, "the decoder has no cross-attention layer"
    return total / len(probe.queries)


def _pad(sequences: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    out = torch.full((len(sequences), max(len(s) for s in sequences)), pad_id, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        out[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
    return out
