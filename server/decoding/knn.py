"""Retrieval during decoding (kNN-MT, Khandelwal et al. 2021), per sentence as in Simple
and Scalable kNN-MT (Dai et al. 2023): the few memory pairs most like the sentence are
forced through the model that decodes it (server/engine/knn_store.py), giving a small
datastore of (decoder final hidden state -> the next target token); at every step the
row's nearest keys vote for their tokens and the vote is mixed into the model's
distribution:

    p(y) = (1 - lam) * p_model(y) + lam * p_knn(y),
    p_knn(y) proportional to the sum over the k nearest keys with value y of exp(-d / T),
    d = squared L2 distance / d_model (the mean squared difference per dimension),
    lam = max_weight * max(0, 1 - d_nearest / gate).

The weight is decided by the step's own distances (robust / adaptive kNN-MT without a
trained network): a step whose nearest key is `gate` or farther gets weight exactly 0 and
its log-probs are not touched at all, so text unlike the memory decodes bit-identically
to decoding without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor

from server.decoding.step_hooks import SentenceGuide, StepHook, StepRows

Pair = tuple[tuple[int, ...], tuple[int, ...]]  # (source ids with EOS, target ids without)


@dataclass(frozen=True)
class KnnParams:
    k: int = 8  # neighbours per step
    temperature: float = 1.0  # of the neighbours' softmax over -distance
    gate: float = 0.5  # the nearest key's distance at which the memory's weight reaches 0
    max_weight: float = 0.5  # the memory's weight for a step whose nearest key is exact

    def __post_init__(self) -> None:
        if self.k < 1 or self.temperature <= 0 or self.gate <= 0:
            raise ValueError("k >= 1, temperature > 0 and gate > 0 are required")
        if not 0 <= self.max_weight <= 1:
            raise ValueError("max_weight must be within [0, 1]")


@dataclass
class KnnReport:
    """How much a sentence's memory weighed (filled while it decodes; `explain`). The
    per-step tallies stay on the device (`tallies`: a hook's [stores, 3] tensor of rows,
    weight sum and rows on, and this sentence's store in it) until the report is read, so
    decoding never waits on them."""

    neighbours: int = 0  # memory pairs retrieved for the sentence
    keys: int = 0  # datastore entries they gave
    gate: float = 0.0  # the gate it decoded with
    calibrated: bool = False  # the memory's own calibrated gate (else the settings')
    tallies: list[tuple[Tensor, int]] = field(default_factory=list, repr=False, compare=False)

    def _tally(self, column: int) -> float:
        return sum(float(tally[store, column]) for tally, store in self.tallies)

    @property
    def rows(self) -> int:
        """Row-steps decoded (beam rows count each)."""
        return round(self._tally(0))

    @property
    def rows_on(self) -> int:
        """Row-steps whose weight was above 0."""
        return round(self._tally(2))

    @property
    def weight_sum(self) -> float:
        return self._tally(1)

    @property
    def mean_weight(self) -> float:
        """The memory's mean weight over every row-step (0: it never weighed in)."""
        rows = self.rows
        return self.weight_sum / rows if rows else 0.0


@dataclass(frozen=True)
class Neighbours:
    """What a sentence job carries: the memory pairs retrieved for it (as token ids); the
    engine forces them through the sentence's model into a `KnnGuide`."""

    pairs: tuple[Pair, ...]
    params: KnnParams = KnnParams()
    report: KnnReport = field(default_factory=KnnReport, compare=False)


@dataclass(frozen=True)
class KnnGuide:
    """One sentence's datastore: keys [n, d] (float32) and their next tokens [n]."""

    keys: Tensor
    values: Tensor
    params: KnnParams
    report: KnnReport

    def batched(self, guides: Mapping[int, SentenceGuide]) -> StepHook:
        return KnnHook({s: g for s, g in guides.items() if isinstance(g, KnnGuide)})


class KnnHook:
    """`StepHook` of a batch's datastores: padded to [stores, n_max, d] so that one
    batched matmul finds every row's distances to its own sentence's keys."""

    def __init__(self, guides: Mapping[int, KnnGuide]) -> None:
        self.store_of = {sentence: i for i, sentence in enumerate(guides)}
        chosen = list(guides.values())
        self.reports = [g.report for g in chosen]
        first = chosen[0].keys
        device, width = first.device, first.shape[1]
        longest = max(g.keys.shape[0] for g in chosen)
        keys = torch.zeros((len(chosen), longest, width), device=device)
        norms = torch.full((len(chosen), longest), float("inf"), device=device)
        values = torch.zeros((len(chosen), longest), dtype=torch.long, device=device)
        for i, guide in enumerate(chosen):
            n = guide.keys.shape[0]
            keys[i, :n] = guide.keys
            norms[i, :n] = guide.keys.pow(2).sum(-1)  # padding stays infinitely far
            values[i, :n] = guide.values
        self.keys_t = keys.transpose(1, 2).contiguous()  # [stores, d, n_max]
        self.norms, self.values, self.width = norms, values, width
        self.k = min(longest, max(g.params.k for g in chosen))
        self.own_k = torch.tensor([g.params.k for g in chosen], device=device)
        self.gate = torch.tensor([g.params.gate for g in chosen], device=device)
        self.temperature = torch.tensor([g.params.temperature for g in chosen], device=device)
        self.max_weight = torch.tensor([g.params.max_weight for g in chosen], device=device)
        # on the CPU, checking whether any row is on costs no wait: idle steps are skipped
        self.skip_idle = device.type == "cpu"
        # rows, weight sum, rows on per store, summed on the device (read with the reports)
        self.tally = torch.zeros((len(chosen), 3), dtype=torch.float64, device=device)
        for store, report in enumerate(self.reports):
            report.tallies.append((self.tally, store))

    def distances(self, hidden: Tensor, stores: list[int]) -> Tensor:
        """[rows, n_max]: each row's distance to its store's keys (inf: padding)."""
        device = self.keys_t.device
        place: list[int] = []
        taken = [0] * len(self.reports)
        for store in stores:
            place.append(taken[store])
            taken[store] += 1
        across = max(taken)
        flat = torch.tensor([s * across + p for s, p in zip(stores, place, strict=True)],
                            device=device)
        store_index = torch.tensor(stores, device=device)
        queries = torch.zeros((len(self.reports) * across, self.width), device=device)
        queries.index_copy_(0, flat, hidden)
        dots = torch.bmm(queries.view(len(self.reports), across, self.width), self.keys_t)
        dots = dots.view(-1, dots.shape[-1]).index_select(0, flat)
        squared = (hidden.pow(2).sum(-1, keepdim=True) - 2 * dots
                   + self.norms.index_select(0, store_index))
        return squared.clamp_(min=0) / self.width

    def adjust(self, log_probs: Tensor, hidden: Tensor | None, rows: StepRows) -> None:
        picked = [(row, self.store_of[s]) for row, s in enumerate(rows.sentences)
                  if s in self.store_of]
        if not picked or hidden is None:
            return
        device = log_probs.device
        row_index = torch.tensor([row for row, _ in picked], device=device)
        stores = [store for _, store in picked]
        store_index = torch.tensor(stores, device=device)
        queries = hidden.index_select(0, row_index.to(hidden.device)).float().to(device)
        near, where = self.distances(queries, stores).topk(self.k, dim=-1, largest=False)
        gate = self.gate.index_select(0, store_index)
        weight = (self.max_weight.index_select(0, store_index)
                  * (1 - near[:, 0] / gate).clamp(min=0))
        on_mask = weight > 0
        self.tally.index_add_(0, store_index, torch.stack(
            [torch.ones_like(weight), weight, on_mask.to(weight.dtype)], dim=1).double())
        if self.skip_idle:
            if not bool(on_mask.any()):
                return  # every row is left exactly as the model made it
            chosen = on_mask.nonzero().squeeze(1)
        else:  # no wait on the device: every picked row is mixed, rows at 0 keep their own
            chosen = torch.arange(weight.shape[0], device=device)
        near, where = near.index_select(0, chosen), where.index_select(0, chosen)
        store_index = store_index.index_select(0, chosen)
        beyond = (torch.arange(self.k, device=device)[None]
                  >= self.own_k.index_select(0, store_index)[:, None])
        near = near.masked_fill(beyond, float("inf"))
        temperature = self.temperature.index_select(0, store_index)[:, None]
        votes = torch.softmax(-near / temperature, dim=-1)  # the nearest is finite
        tokens = self.values.index_select(0, store_index).gather(1, where)
        knn = torch.zeros((chosen.shape[0], log_probs.shape[1]), device=device)
        knn.scatter_add_(1, tokens, votes)
        lam = weight.index_select(0, chosen)[:, None]
        targets = row_index.index_select(0, chosen)
        own = log_probs.index_select(0, targets)
        mixed = ((1 - lam) * own.exp() + lam * knn).log()
        log_probs.index_copy_(0, targets, torch.where(lam > 0, mixed.to(own.dtype), own))
