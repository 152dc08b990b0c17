"""Decoding steps over fixed-shape buffers, so that a GPU replays each step as one CUDA
graph instead of launching its few hundred kernels from Python.

Why: on a GPU a decoding step of a modest batch is bound by launching kernels, not by
running them (benchmarks/results/history/engine_profile_gpu-2026-11-26-eager-steps.txt: at
batch 32, greedy, float16, the kernels kept an H200 busy for a fifth of the step). A CUDA
graph replays a recorded step with one launch, but every tensor it touches must keep its
address and shape. So, for one batch:

- rows never move between sentences: sentence s owns rows [s * beam, (s + 1) * beam). A
  finished sentence's rows go on being computed (cheap on a GPU) and are ignored;
- the self-attention cache has the batch's whole capacity (its longest `max_length`),
  allocated at once, and each step attends over all of it, the positions not yet decoded
  masked by a bias;
- the position is a tensor on the device, which the step reads and advances.

The search keeps its compact rows; `FixedStepper` maps them onto the fixed rows: tokens go
in through an index, log-probabilities come out through it, and a beam reorder copies the
cache rows of the beams that moved (within their sentence's rows), outside the graph.

On CUDA the first step runs eagerly on a side stream (it initialises what kernels set up
lazily), the second is captured and replayed, and every later one replayed. Elsewhere (the
tests on CPU) every step runs eagerly on the same buffers: the arithmetic is the graph's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from server.engine.backbone import Backbone
from server.engine.decode_state import DecoderState, SelfAttentionCache
from server.engine.slots import BatchHooks, ModuleBank, runs_of

log = logging.getLogger(__name__)

RowKey = tuple[ModuleBank | None, int]


class FixedSelfCache(SelfAttentionCache):
    """Self-attention keys/values [capacity, 2 * layers, rows, heads, head_dim], allocated
    once (zeros: a masked position must hold no NaN, or 0 * NaN would leak into the
    output), written at the device `position`."""

    def __init__(self, layers: int, *, capacity: int, rows: int, heads: int, head_dim: int,
                 position: Tensor, dtype: torch.dtype) -> None:
        super().__init__(layers)
        self.buffer = torch.zeros((capacity, 2 * layers, rows, heads, head_dim),
                                  dtype=dtype, device=position.device)
        self.position = position

    def append(self, layer: int, position: int, k: Tensor,
               v: Tensor) -> tuple[Tensor, Tensor]:
        """Store k, v ([rows, heads, 1, head_dim]) at the device position (`position`, the
        host's count, is not read: a graph would freeze it); returns the layer's keys and
        values over the whole capacity."""
        buffer = self.buffer
        assert buffer is not None
        buffer[:, 2 * layer].index_copy_(0, self.position, k[:, :, 0][None])
        buffer[:, 2 * layer + 1].index_copy_(0, self.position, v[:, :, 0][None])
        return (buffer[:, 2 * layer].permute(1, 2, 0, 3),
                buffer[:, 2 * layer + 1].permute(1, 2, 0, 3))

    def move_rows(self, permutation: Tensor, filled: int) -> None:
        """Row r of the first `filled` positions takes row permutation[r]'s history."""
        assert self.buffer is not None
        block = self.buffer[:filled]
        block.copy_(block.index_select(2, permutation))


class FixedStepper:
    """`Stepper` over fixed rows: `beam` rows per sentence, every step the same shapes
    (one CUDA graph when `capture`). Sentence s decodes with module `keys[s]`; no
    ensembles (one member per sentence)."""

    def __init__(self, model: Backbone, project: Callable[[Tensor], Tensor],
                 state: DecoderState, *, keys: Sequence[RowKey], beam: int, capacity: int,
                 capture: bool) -> None:
        self.model, self.project = model, project
        self.beam = beam
        rows = len(keys) * beam
        device = state.memory_mask.device
        dtype = self.dtype = state.layers[0].cross_k.dtype
        config = model.config
        self.position = torch.zeros(1, dtype=torch.long, device=device)
        self.cache_positions = torch.arange(capacity, device=device)  # 0..capacity-1
        # The encoder's state has one group per sentence: its `beam` rows share the
        # sentence's cross-attention keys and values.
        self.state = DecoderState(
            memory_mask=state.memory_mask, layers=state.layers,
            self_cache=FixedSelfCache(config.decoder_layers, capacity=capacity, rows=rows,
                                      heads=config.n_heads, head_dim=config.head_dim,
                                      position=self.position, dtype=dtype),
            group_size=beam, memory_bias=state.memory_bias, position=self.position)
        hooks = BatchHooks(runs_of([keys[row // beam] for row in range(rows)]))
        self.hooks = hooks if hooks.runs else None
        self.tokens = torch.zeros(rows, dtype=torch.long, device=device)
        self.no_memory = torch.empty(0, device=device)
        # The search's rows (one per sentence until the first reorder): their sentence and
        # their fixed row.
        self.sentence_of = list(range(len(keys)))
        self.fixed = [sentence * beam for sentence in self.sentence_of]
        self.index = torch.tensor(self.fixed, dtype=torch.long, device=device)
        self.steps = 0
        self.capture = capture
        self.graph: torch.cuda.CUDAGraph | None = None
        self.out: Tensor | None = None
        self.hidden_out: Tensor | None = None

    def _body(self) -> Tensor:
        """One step of every fixed row: log-probabilities [rows, vocab] (float32)."""
        state = self.state
        bias = torch.zeros(self.cache_positions.shape, dtype=self.dtype,
                           device=self.cache_positions.device)
        state.self_bias = bias.masked_fill_(self.cache_positions > self.position, -float("inf"))
        hidden = self.model.decode(self.tokens[:, None], self.no_memory, state.memory_mask,
                                   self.hooks, state)
        self.hidden_out = hidden[:, -1]  # a graph's output too: kept at its address
        out = torch.log_softmax(self.project(self.hidden_out).float(), dim=-1)
        self.position.add_(1)
        return out

    def _eager_on_side_stream(self) -> Tensor:
        current = torch.cuda.current_stream(self.tokens.device)
        side = torch.cuda.Stream(device=self.tokens.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            out = self._body()
        current.wait_stream(side)
        out.record_stream(current)  # made on the side stream, read on this one
        if self.hidden_out is not None:
            self.hidden_out.record_stream(current)
        return out

    def _captured(self) -> Tensor:
        """Record the step on a side stream, then replay it. `capture_begin`/`capture_end`
        directly, not the `torch.cuda.graph` context: that one also empties the allocator's
        cache (and may collect garbage) on entry, which cost ~15 ms per batch, a quarter of
        a beam-4 decode (history/engine_profile_gpu-2026-11-26-graph-context.txt)."""
        graph = torch.cuda.CUDAGraph()
        current = torch.cuda.current_stream(self.tokens.device)
        side = torch.cuda.Stream(device=self.tokens.device)
        side.wait_stream(current)
        try:
            with torch.cuda.stream(side):
                graph.capture_begin()
                try:
                    out = self._body()
                finally:
                    graph.capture_end()
        except RuntimeError as error:  # a module whose step cannot be captured
            log.warning("decoding step not captured as a CUDA graph (%s); running eagerly",
                        error)
            self.capture = False
            return self._body()
        current.wait_stream(side)
        self.graph, self.out = graph, out
        graph.replay()
        return out

    def step(self, tokens: Tensor) -> Tensor:
        self.tokens.index_copy_(0, self.index, tokens.to(self.tokens.device))
        if self.graph is not None and self.out is not None:
            self.graph.replay()
            out = self.out
        elif self.capture and self.steps == 0:
            out = self._eager_on_side_stream()
        elif self.capture:
            out = self._captured()
        else:
            out = self._body()
        self.steps += 1
        return out.index_select(0, self.index)

    def hidden(self) -> Tensor:
        """The last step's final hidden states of the search's rows."""
        assert self.hidden_out is not None, "no step yet"
        return self.hidden_out.index_select(0, self.index)

    def reorder(self, index: Tensor) -> None:
        """The search keeps its rows `index`: each lands on a row of its sentence (the
        first beams of a sentence first); cache rows follow the beams that moved."""
        parents = index.tolist()
        sentence_of = [self.sentence_of[parent] for parent in parents]
        taken: dict[int, int] = {}
        fixed: list[int] = []
        for sentence in sentence_of:
            beam = taken.get(sentence, 0)
            if beam >= self.beam:
                raise ValueError(f"more than {self.beam} rows for sentence {sentence}")
            taken[sentence] = beam + 1
            fixed.append(sentence * self.beam + beam)
        sources = [self.fixed[parent] for parent in parents]
        if fixed != sources:
            permutation = list(range(self.tokens.shape[0]))
            for target, source in zip(fixed, sources, strict=True):
                permutation[target] = source
            cache = self.state.self_cache
            assert isinstance(cache, FixedSelfCache)
            cache.move_rows(torch.tensor(permutation, dtype=torch.long,
                                         device=self.tokens.device), self.steps)
        self.sentence_of, self.fixed = sentence_of, fixed
        self.index = torch.tensor(fixed, dtype=torch.long, device=self.tokens.device)
