"""Preallocated module banks and the per-batch hooks that apply them row group by row group.

A bank holds `n_slots` modules of one family and one shape in stacked tensors
(`[n_slots, *shape]`); activating a module is a copy into a slot, never an allocation.
A batch's rows are ordered so that rows sharing a slot are contiguous; `BatchHooks` runs
each family once per run of rows on a view of the hidden states, or, for a bank with
grouped copies, every run of the bank at once (`RowGroups`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from contract.backbone import BackboneConfig
from server.engine import int8_groups
from server.engine.families import Family, Params, get_family
from server.engine.hooks import Linear, Project, Side
from server.engine.packing import pack_matrix, packed_key, quantize_matrix, quantized_key


def bank_key(config: dict[str, Any]) -> str:
    """Modules with equal keys share a bank (same family, same shapes)."""
    return json.dumps(config, sort_keys=True)


class ModuleBank:
    """`n_slots` preallocated modules of one family/shape on the engine's device."""

    def __init__(self, family: Family, config: dict[str, Any], backbone: BackboneConfig, *,
                 n_slots: int, device: torch.device, dtype: torch.dtype,
                 pack: bool = False, int8: bool = False,
                 grouped_dtype: torch.dtype | None = None) -> None:
        self.family = family
        self.config = config
        self.n_slots = n_slots
        self.device = device
        # Packed copies of the family's matrices, rebuilt at every write (CPU float32 only):
        # with 8 modules in a batch, each runs on a few rows, where oneDNN with a packed
        # weight took 3.1 ms per decoding step against 5.2 ms for MKL's sgemm
        # (benchmarks/results/engine_speed_bounds.md).
        self.pack = pack and bool(family.packed_matrices)
        # int8 copies instead (CPU): a quarter of the float32 bytes to stream per step
        # (engine_speed_bounds.md).
        self.int8 = int8 and bool(family.packed_matrices) and device.type == "cpu"
        # Grouped copies (families with a grouped form): a batch mixing 8 modules ran 8
        # small matmuls per matrix and layer, each paying a call's overhead and reading a
        # module's weights for a few rows; one batched matmul over bfloat16 copies of the
        # modules in the batch halves the bytes and makes one call (engine_speed.md).
        self.grouped_dtype = grouped_dtype if family.grouped_sites else None
        self._stacked: tuple[tuple[int, ...], Params] | None = None
        self.writes = 0  # slot writes so far: a copy made before one may be stale
        self.shapes = family.shapes(backbone, config)
        self.tensors = {name: torch.zeros((n_slots, *shape), device=device, dtype=dtype)
                        for name, shape in self.shapes.items()}
        # int8 banks of a family with a grouped form run grouped through int8_groups: one
        # call per matrix and layer for all of a batch's modules, each module's int8
        # weights read in place. Layer-major ([layers, n_slots, ...]): a layer's slots
        # are one tensor the kernel indexes.
        self.int8_grouped = (self.int8 and self.grouped_dtype is None
                             and bool(family.grouped_sites)
                             and all(int8_groups.fits(self.shapes[name][-1])
                                     for name in family.packed_matrices)
                             and int8_groups.available())
        self.int8_weights: dict[str, Tensor] = {}
        self.int8_scales: dict[str, Tensor] = {}
        for name in family.packed_matrices if self.int8_grouped else ():
            layers, rows, columns = self.shapes[name]
            self.int8_weights[name] = torch.zeros(
                (layers, n_slots, columns // int8_groups.BLOCK, rows, int8_groups.BLOCK),
                dtype=torch.int8)
            self.int8_scales[name] = torch.zeros((layers, n_slots, columns))
        # Per-slot views, made once: projection families look their tensors up at every
        # projection of every step, and a family may have ~100 tensors per module.
        self._views = [{name: tensor[slot] for name, tensor in self.tensors.items()}
                       for slot in range(n_slots)]

    def write(self, slot: int, params: Params) -> None:
        """Copy a module's tensors into `slot` (the hot swap)."""
        for name, target in self.tensors.items():
            target[slot].copy_(params[name])
        self._stacked = None
        self.writes += 1
        for name in self.int8_weights:
            weights, scales = int8_groups.pack(self.tensors[name][slot])
            self.int8_weights[name][:, slot] = weights
            self.int8_scales[name][:, slot] = scales
        view = self._views[slot]
        copies = (self.int8 or self.pack) and not self.int8_grouped
        for name in self.family.packed_matrices if copies else ():
            for layer, matrix in enumerate(self.tensors[name][slot]):
                if self.int8:
                    view[quantized_key(name, layer)] = quantize_matrix(matrix)
                else:
                    view[packed_key(name, layer)] = pack_matrix(matrix)

    def view(self, slot: int) -> Params:
        """Slot `slot`'s tensors (views into the bank; a `write` shows through them)."""
        return self._views[slot]

    def stacked(self, slots: tuple[int, ...]) -> Params:
        """The tensors of `slots` for a grouped call, layer-major and contiguous: matrices
        `[layers, n, in, out]` in the grouped dtype, vectors `[layers, n, 1, size]` (they
        broadcast over a module's tokens). Gathered once per slot set: a decode keeps its
        set from step to step; a `write` drops it. An int8 grouped bank gathers only the
        vectors; its matrices are the bank's int8 tensors and `slots` (`int8_groups`)."""
        if self._stacked is not None and self._stacked[0] == slots:
            return self._stacked[1]
        index = torch.tensor(slots, dtype=torch.long, device=self.device)
        stacked: Params = {}
        if self.int8_grouped:
            stacked[int8_groups.SLOTS_KEY] = index
            for name in self.int8_weights:
                stacked[int8_groups.weights_key(name)] = self.int8_weights[name]
                stacked[int8_groups.scales_key(name)] = self.int8_scales[name]
        for name, tensor in self.tensors.items():
            if name in self.int8_weights:
                continue
            picked = tensor.index_select(0, index).transpose(0, 1)  # [layers, n, ...]
            if picked.dim() == 3:
                picked = picked.unsqueeze(2)
            if name in self.family.grouped_low_precision:
                picked = picked.to(self.grouped_dtype)
            stacked[name] = picked.contiguous()
        self._stacked = (slots, stacked)
        return stacked


@dataclass(frozen=True)
class RowRun:
    """Rows [start, end) of a batch use `slot` of `bank` (bank None = plain backbone)."""

    bank: ModuleBank | None
    slot: int
    start: int
    end: int


def runs_of(row_slots: list[tuple[ModuleBank | None, int]]) -> list[RowRun]:
    """Run-length encode the per-row (bank, slot) list."""
    runs: list[RowRun] = []
    start = 0
    for row in range(1, len(row_slots) + 1):
        if row == len(row_slots) or row_slots[row] != row_slots[start]:
            bank, slot = row_slots[start]
            runs.append(RowRun(bank, slot, start, row))
            start = row
    return runs


class RowGroups:
    """The runs of one grouped bank laid out for a batched call: run i's rows become row
    i of `[n, rows_per_run * len, d]`, runs shorter than the longest padded with repeats of
    their last row (computed, then dropped). When the runs are equal and cover the batch in
    order, the layout is a view and nothing is copied."""

    def __init__(self, bank: ModuleBank, runs: list[RowRun]) -> None:
        self.bank = bank
        self.slots = tuple(run.slot for run in runs)
        self.width = max(run.end - run.start for run in runs)
        self.rows = sum(run.end - run.start for run in runs)
        self.dense = runs[0].start == 0 and all(
            run.end - run.start == self.width and run.start == i * self.width
            for i, run in enumerate(runs))
        # made on the bank's device once per batch: a step captured as a CUDA graph may not
        # copy from host memory
        device = bank.device
        self.gather = self.covered = self.unpad = torch.empty(0, dtype=torch.long)
        if not self.dense:
            self.gather = _indices([min(run.start + j, run.end - 1) for run in runs
                                    for j in range(self.width)], device)
            self.covered = _indices([row for run in runs for row in range(run.start, run.end)],
                                    device)
            self.unpad = _indices([i * self.width + j for i, run in enumerate(runs)
                                   for j in range(run.end - run.start)], device)

    def add(self, hidden: Tensor, delta: Callable[[Tensor], Tensor]) -> Tensor:
        """hidden [batch, len, d] plus, on the runs' rows, `delta` of their grouped layout."""
        batch, length, dim = hidden.shape
        n = len(self.slots)
        if self.dense and batch == self.rows:  # the runs cover the batch in equal parts
            return hidden + delta(hidden.view(n, self.width * length, dim)).view_as(hidden)
        grouped = hidden.index_select(0, self.gather).view(n, -1, dim)
        added = delta(grouped).view(n * self.width, length, dim)
        return hidden.index_add(0, self.covered, added.index_select(0, self.unpad))


def _indices(values: list[int], device: torch.device) -> Tensor:
    return torch.tensor(values, dtype=torch.long, device=device)


def grouped_layer_runs(runs: list[RowRun]) -> RowGroups | None:
    """A `RowGroups` when every run with an after-layer module uses one bank with grouped
    copies or int8 grouped weights (the common case: a batch of residual adapters); None
    otherwise."""
    layered = [run for run in runs if run.bank is not None and "layer" in run.bank.family.sites]
    banks = {id(run.bank) for run in layered}
    bank = layered[0].bank if len(banks) == 1 else None
    if bank is None or (bank.grouped_dtype is None and not bank.int8_grouped):
        return None
    return RowGroups(bank, layered)


class BatchHooks:
    """`ModuleHooks` for one batch: each run of rows gets its slot's module.

    Semantics (the reference loop):
        for row in batch: hidden[row] = family(slot_of[row]).site(hidden[row])
    Runs replace the per-row loop by one call per contiguous run on a view.
    """

    def __init__(self, runs: list[RowRun]) -> None:
        self.runs = [run for run in runs if run.bank is not None]
        self.needs_layer_states = any("stack" in r.bank.family.sites
                                      for r in self.runs if r.bank is not None)
        self._sites = {site for r in self.runs if r.bank is not None
                       for site in r.bank.family.sites}
        self._grouped = grouped_layer_runs(self.runs)

    def _apply(self, site: str, hidden: Tensor, call: Any) -> Tensor:
        if site not in self._sites:
            return hidden
        if not torch.is_grad_enabled():
            out = hidden.clone() if hidden.requires_grad else hidden
            for run in self.runs:
                assert run.bank is not None
                if site in run.bank.family.sites:
                    out[run.start: run.end] = call(run, out[run.start: run.end])
            return out
        pieces: list[Tensor] = []
        covered = 0
        for run in self.runs:
            assert run.bank is not None
            if site not in run.bank.family.sites:
                continue
            if run.start > covered:
                pieces.append(hidden[covered: run.start])
            pieces.append(call(run, hidden[run.start: run.end]))
            covered = run.end
        if covered < hidden.shape[0]:
            pieces.append(hidden[covered:])
        return torch.cat(pieces) if len(pieces) > 1 else pieces[0]

    @staticmethod
    def _family(run: RowRun) -> Family:
        assert run.bank is not None
        return run.bank.family

    def embed(self, side: Side, ids: Tensor, embedded: Tensor) -> Tensor:
        return self._apply("embed", embedded, lambda run, x: self._family(run).embed(
            run.bank.view(run.slot), side, ids[run.start: run.end], x))

    def grouped_copies(self) -> Params | None:
        """The grouped bank's copies of this batch's modules (gathered now, if they were
        not): a step captured as a CUDA graph reads them, so the graph's owner keeps them
        alive and gathers them before the capture (which may not copy from the host)."""
        groups = self._grouped
        return groups.bank.stacked(groups.slots) if groups is not None else None

    def after_layer(self, side: Side, index: int, hidden: Tensor) -> Tensor:
        groups = self._grouped
        if groups is not None and not torch.is_grad_enabled():
            stacked = groups.bank.stacked(groups.slots)
            family = groups.bank.family
            return groups.add(hidden, lambda x: family.after_layer_grouped(
                stacked, side, index, x))
        return self._apply("layer", hidden, lambda run, x: self._family(run).after_layer(
            run.bank.view(run.slot), side, index, x))

    def after_stack(self, side: Side, hidden: Tensor, states: list[Tensor]) -> Tensor:
        return self._apply("stack", hidden, lambda run, x: self._family(run).after_stack(
            run.bank.view(run.slot), side, x, [s[run.start: run.end] for s in states]))

    def projections(self, side: Side, index: int) -> Project | None:
        if "project" not in self._sites:
            return None

        def project(name: str, x: Tensor, linear: Linear) -> Tensor:
            # Rows run by run: a module's own projection where it has one, else the
            # backbone's; contiguous stretches without an override share one call.
            pieces: list[Tensor] = []
            plain_from = 0
            for run in self.runs:
                assert run.bank is not None
                if "project" not in run.bank.family.sites:
                    continue
                out = run.bank.family.project(run.bank.view(run.slot), side, index, name,
                                              x[run.start: run.end], linear)
                if out is None:
                    continue
                if run.start > plain_from:
                    pieces.append(linear(x[plain_from: run.start]))
                pieces.append(out)
                plain_from = run.end
            if not pieces:
                return linear(x)
            if plain_from < x.shape[0]:
                pieces.append(linear(x[plain_from:]))
            return torch.cat(pieces) if len(pieces) > 1 else pieces[0]

        return project


def build_bank(config: dict[str, Any], backbone: BackboneConfig, *, n_slots: int,
               device: torch.device, dtype: torch.dtype, pack: bool = False,
               int8: bool = False, grouped_dtype: torch.dtype | None = None) -> ModuleBank:
    family = get_family(str(config["family"]))
    if family.bank_slots is not None:  # large modules (k copies of the projections)
        n_slots = min(n_slots, family.bank_slots)
    return ModuleBank(family, config, backbone, n_slots=n_slots, device=device, dtype=dtype,
                      pack=pack, int8=int8, grouped_dtype=grouped_dtype)
