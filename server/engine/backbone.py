"""The Transformer encoder-decoder backbone, driven by `BackboneConfig`.

Parameter names (the engine's own spec; converters map external checkpoints onto them):

    embed.weight                          shared embedding (shared_embeddings="all")
    encoder.embed.weight / decoder.embed.weight   when not shared
    encoder.positions.weight / decoder.positions.weight   learned positions only
    {encoder,decoder}.layers.N.self_attn.{q,k,v,o}_proj.{weight,bias}
    {encoder,decoder}.layers.N.self_attn_norm.{weight,bias}
    decoder.layers.N.cross_attn.{q,k,v,o}_proj.{weight,bias}
    decoder.layers.N.cross_attn_norm.{weight,bias}
    {encoder,decoder}.layers.N.ffn.{fc1,fc2}.{weight,bias}
    {encoder,decoder}.layers.N.ffn_norm.{weight,bias}
    {encoder,decoder}.final_norm.{weight,bias}     pre-norm only
    output.weight                          shared_embeddings="none" only
    output_bias                            output_bias=True only
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import cast

import torch
from torch import Tensor, nn

from contract.backbone import BackboneConfig
from server.engine.hooks import ModuleHooks, Project, Side
from server.engine.layers import Attention, FeedForward, Positions


class EncoderLayer(nn.Module):
    def __init__(self, config: BackboneConfig) -> None:
        super().__init__()
        self.pre_norm = config.normalize_before
        self.self_attn = Attention(config, "self_attn")
        self.self_attn_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.ffn = FeedForward(config)
        self.ffn_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, mask: Tensor, project: Project | None = None) -> Tensor:
        if self.pre_norm:
            h = self.self_attn_norm(x)
            q, k, v = self.self_attn.project_qkv(h, project)
            x = x + self.dropout(self.self_attn.attend(h, k, v, mask=mask, project=project,
                                                       q=q))
            return x + self.dropout(self.ffn(self.ffn_norm(x), project))
        q, k, v = self.self_attn.project_qkv(x, project)
        x = self.self_attn_norm(x + self.dropout(self.self_attn.attend(x, k, v, mask=mask,
                                                                       project=project, q=q)))
        return self.ffn_norm(x + self.dropout(self.ffn(x, project)))


@dataclass
class LayerCache:
    """Cached cross-attention keys/values of one decoder layer, each
    [groups, heads, src_len, head_dim] (see `DecoderState`)."""

    cross_k: Tensor
    cross_v: Tensor


class SelfAttentionCache:
    """Self-attention keys/values of every decoder layer in one position-major buffer
    [capacity, 2 * layers, rows, heads, head_dim], written in place at each step.

    Why position-major: the decoded positions 0..filled-1 are one contiguous block, so a
    reorder copies only what was decoded (not the spare capacity) with one contiguous
    `index_select`, and a layer's keys [rows, heads, length, head_dim] are a strided view
    that the batched matmul reads without a copy. A beam step keeps rows where they are
    (`continue_rows`: only a parent's second and later children are copied). Any other
    reorder that is the identity copies nothing; one that moves few rows rewrites only
    those rows in place; otherwise the rows are gathered into a second buffer (the two
    swap). Capacity grows `CHUNK` positions at a time, copying the filled block once, so
    steady decoding allocates nothing.
    """

    CHUNK = 16
    IN_PLACE_SHARE = 1 / 3  # rewrite in place when at most this share of rows moves

    def __init__(self, layers: int) -> None:
        self.layers = layers
        self.buffer: Tensor | None = None  # [capacity, 2 * layers, rows, heads, dim]
        self.spare: Tensor | None = None  # flat storage the next gathering reorder fills
        self.filled = 0  # positions written so far

    def append(self, layer: int, position: int, k: Tensor,
               v: Tensor) -> tuple[Tensor, Tensor]:
        """Store layer `layer`'s key/value of target `position` (k, v: [rows, heads, 1,
        head_dim]); returns that layer's keys/values of positions 0..position, each a view
        [rows, heads, position + 1, head_dim]."""
        if self.buffer is None or position >= self.buffer.shape[0]:
            self._grow(position + 1, k)
        buffer = self.buffer
        assert buffer is not None
        buffer[position, 2 * layer] = k[:, :, 0]
        buffer[position, 2 * layer + 1] = v[:, :, 0]
        self.filled = max(self.filled, position + 1)
        keys = buffer[: position + 1, 2 * layer].permute(1, 2, 0, 3)
        values = buffer[: position + 1, 2 * layer + 1].permute(1, 2, 0, 3)
        return keys, values

    def _grow(self, needed: int, like: Tensor) -> None:
        rows, heads, _, dim = like.shape
        capacity = -(-needed // self.CHUNK) * self.CHUNK
        grown = like.new_empty((capacity, 2 * self.layers, rows, heads, dim))
        if self.buffer is not None:
            grown[: self.filled] = self.buffer[: self.filled]
        self.buffer, self.spare = grown, None

    def continue_rows(self, source: Tensor) -> Tensor | None:
        """New row j continues cache row `source[j]`, where every source lies in its new
        row's group (a beam step). Rows stay put: the first row to continue a cache row
        takes it over, the others take the rows that nobody continues (in the same groups,
        as many as there are repeats), rewritten with a copy of their source's history.
        Returns the cache row of each new row (None when that is row j itself)."""
        rows = source.shape[0]
        identity = torch.arange(rows, device=source.device)
        order = torch.argsort(source, stable=True)
        ordered = source.index_select(0, order)
        repeat = torch.zeros(rows, dtype=torch.bool, device=source.device)
        repeat[1:] = ordered[1:] == ordered[:-1]
        duplicates = order[repeat].sort().values  # new rows whose source is already taken
        taken = torch.zeros(rows, dtype=torch.bool, device=source.device)
        taken[source] = True
        free = torch.nonzero(~taken).flatten()  # ascending, as many per group as repeats
        slots = source.clone()
        slots[duplicates] = free
        if duplicates.shape[0] and self.buffer is not None:
            capacity, planes, _, heads, dim = self.buffer.shape
            block = self.buffer.view(capacity * planes, rows, heads * dim)[: self.filled * planes]
            block.index_copy_(1, free, block.index_select(1, source.index_select(0, duplicates)))
        return None if bool((slots == identity).all()) else slots

    def reorder(self, index: Tensor) -> None:
        if self.buffer is None:
            return
        capacity, planes, rows, heads, dim = self.buffer.shape
        filled = self.filled * planes  # leading (position, plane) pairs in use
        if index.shape[0] == rows:
            moved = torch.nonzero(index != torch.arange(rows, device=index.device)).flatten()
            if moved.shape[0] == 0:
                return
            if moved.shape[0] <= rows * self.IN_PLACE_SHARE:
                block = self.buffer.view(capacity * planes, rows, heads * dim)[:filled]
                block.index_copy_(1, moved, block.index_select(1, index.index_select(0, moved)))
                return
        shape = (capacity, planes, index.shape[0], heads, dim)
        if self.spare is None or self.spare.numel() < math.prod(shape):
            self.spare = self.buffer.new_empty(math.prod(shape))
        target = self.spare[: math.prod(shape)].view(shape)
        source = self.buffer.view(capacity * planes, rows, heads * dim)[:filled]
        torch.index_select(source, 1, index,
                           out=target.view(capacity * planes, -1, heads * dim)[:filled])
        self.spare = self.buffer.view(-1)
        self.buffer = target


@dataclass
class DecoderState:
    """Everything incremental decoding carries between steps.

    Cross-attention keys/values and the memory mask are stored once per *group*: the rows of
    a group (the beams of one source row) are contiguous and share their source, so beam
    reordering never copies them; they are re-indexed only when groups are dropped.
    """

    memory_mask: Tensor  # [groups, 1, 1, src_len] True = attend
    layers: list[LayerCache] = field(default_factory=list)
    self_cache: SelfAttentionCache = field(default_factory=lambda: SelfAttentionCache(0))
    length: int = 0  # target positions already decoded
    group_size: int = 1  # rows per group
    # The self-attention cache row of each row (None: row i is cache row i). A reorder
    # inside groups (every beam step that ends no sentence) leaves the histories in place
    # and changes only this map, so it copies just the rows that split from one parent;
    # `Backbone.decode` runs the rows in cache order and returns them in row order.
    slots: Tensor | None = None
    cache_order: Tensor | None = None  # the inverse map: the row held in each cache row
    # The memory mask as cross-attention applies it at a step: an additive bias (0 or
    # -inf: one add per layer instead of a negation and a masked fill), None when no
    # source of the batch is padded.
    memory_bias: Tensor | None = None
    # Fixed-shape steps (server/engine/fixed_steps.py): the position being decoded, on the
    # device, read instead of `length` so that one captured CUDA graph serves every step;
    # and the self-attention bias over the cache's whole capacity (0 up to `position`,
    # -inf after it). None in ordinary decoding.
    position: Tensor | None = None
    self_bias: Tensor | None = None

    def set_memory_mask(self, mask: Tensor, dtype: torch.dtype) -> None:
        self.memory_mask = mask
        self.memory_bias = None if bool(mask.all()) else torch.zeros(
            mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, -float("inf"))

    def reorder(self, index: Tensor) -> None:
        """Keep rows `index` (beam reordering, dropping finished rows): the one state hook."""
        source = index if self.slots is None else self.slots.index_select(0, index)
        if self._inside_groups(index):
            self._set_slots(self.self_cache.continue_rows(source))
            return
        self.self_cache.reorder(source)
        self._set_slots(None)
        groups = torch.div(index, self.group_size, rounding_mode="floor")
        size = _uniform_run(groups)
        if size is None:  # rows of one group no longer contiguous: give every row its own
            self._reindex_groups(groups)
            self.group_size = 1
            return
        kept = groups[::size]
        self.group_size = size
        if kept.shape[0] != self.memory_mask.shape[0] or not bool(
                (kept == torch.arange(kept.shape[0], device=kept.device)).all()):
            self._reindex_groups(kept)

    def _inside_groups(self, index: Tensor) -> bool:
        """Every row kept, each taking a parent of its own group."""
        rows = self.memory_mask.shape[0] * self.group_size
        if index.shape[0] != rows:
            return False
        position = torch.arange(rows, device=index.device)
        if self.group_size == 1:
            return bool((index == position).all())
        return bool((torch.div(index, self.group_size, rounding_mode="floor") ==
                     torch.div(position, self.group_size, rounding_mode="floor")).all())

    def _set_slots(self, slots: Tensor | None) -> None:
        self.slots = slots
        self.cache_order = None if slots is None else torch.argsort(slots)

    def _reindex_groups(self, groups: Tensor) -> None:
        bias_dtype = self.memory_bias.dtype if self.memory_bias is not None else torch.float32
        self.set_memory_mask(self.memory_mask.index_select(0, groups), bias_dtype)
        for cache in self.layers:
            cache.cross_k = cache.cross_k.index_select(0, groups)
            cache.cross_v = cache.cross_v.index_select(0, groups)


def _uniform_run(groups: Tensor) -> int | None:
    """The common length of the runs of equal values in `groups`, when every run has the
    same length and no value repeats after its run; otherwise None."""
    rows = groups.shape[0]
    change = torch.ones(rows, dtype=torch.bool, device=groups.device)
    change[1:] = groups[1:] != groups[:-1]
    starts = torch.nonzero(change).flatten()
    count = starts.shape[0]
    if count == 0 or rows % count:
        return None
    size = rows // count
    expected = torch.arange(0, rows, size, device=groups.device)
    if not bool((starts == expected).all()) or int(groups[starts].unique().shape[0]) != count:
        return None
    return size


class DecoderLayer(nn.Module):
    def __init__(self, config: BackboneConfig, index: int) -> None:
        super().__init__()
        self.index = index  # its slot in the decoder state's self-attention cache
        self.pre_norm = config.normalize_before
        self.self_attn = Attention(config, "self_attn")
        self.self_attn_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.cross_attn = Attention(config, "cross_attn")
        self.cross_attn_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.ffn = FeedForward(config)
        self.ffn_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def self_block(self, x: Tensor, state: DecoderState | None, project: Project | None) -> Tensor:
        q, k, v = self.self_attn.project_qkv(x, project)
        if state is None:  # teacher forcing: whole target at once
            return self.self_attn.attend(x, k, v, mask=None, causal=True, project=project, q=q)
        if x.shape[1] != 1:
            raise ValueError("incremental decoding takes one target position per step")
        k, v = state.self_cache.append(self.index, state.length, k, v)
        # One query sees every cached position: no causal mask is needed (fixed-shape
        # steps see the whole capacity, the positions not yet decoded masked by a bias).
        return self.self_attn.attend(x, k, v, mask=state.self_bias, project=project, q=q)

    def forward(self, x: Tensor, cross_k: Tensor, cross_v: Tensor, memory_mask: Tensor | None,
                state: DecoderState | None = None, project: Project | None = None) -> Tensor:
        """With `state`, one incremental step (x: [rows, 1, d]); without, teacher forcing.
        `memory_mask`: boolean (True = attend), an additive bias, or None (no padding)."""
        group_size = state.group_size if state is not None else 1
        if self.pre_norm:
            x = x + self.dropout(self.self_block(self.self_attn_norm(x), state, project))
            h = self.cross_attn_norm(x)
            x = x + self.dropout(self.cross_attn.attend(h, cross_k, cross_v, mask=memory_mask,
                                                        group_size=group_size, project=project))
            return x + self.dropout(self.ffn(self.ffn_norm(x), project))
        x = self.self_attn_norm(x + self.dropout(self.self_block(x, state, project)))
        x = self.cross_attn_norm(x + self.dropout(self.cross_attn.attend(
            x, cross_k, cross_v, mask=memory_mask, group_size=group_size, project=project)))
        return self.ffn_norm(x + self.dropout(self.ffn(x, project)))


class Stack(nn.Module):
    """Embedding + positions + layers (+ final norm for pre-norm) of one side."""

    def __init__(self, config: BackboneConfig, side: Side, vocab_size: int,
                 embed: nn.Embedding | None) -> None:
        super().__init__()
        self.side: Side = side
        self.config = config
        if embed is None:
            self.embed = nn.Embedding(vocab_size, config.d_model, padding_idx=None)
        # Not registered as a child: the shared matrix has one name (`embed.weight`).
        object.__setattr__(self, "_shared_embed", embed)
        self.positions = Positions(config)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.layers = nn.ModuleList(
            [EncoderLayer(config) for _ in range(config.encoder_layers)] if side == "encoder"
            else [DecoderLayer(config, index) for index in range(config.decoder_layers)])
        if config.normalize_before:
            self.final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def embedding(self) -> nn.Embedding:
        shared: nn.Embedding | None = self.__dict__["_shared_embed"]
        return shared if shared is not None else self.embed

    def embed_ids(self, ids: Tensor, offset: int, hooks: ModuleHooks | None,
                  position: Tensor | None = None) -> Tensor:
        """Embedded `ids` at positions offset.. (or, one step, at the device `position`)."""
        x = self.embedding()(ids)  # [batch, len, d_model]
        if hooks is not None:
            x = hooks.embed(self.side, ids, x)
        where = (self.positions(ids.shape[1], offset) if position is None
                 else self.positions.at(position))
        x = x * self.embed_scale + where
        return self.dropout(x)

    def finish(self, x: Tensor, states: list[Tensor], hooks: ModuleHooks | None) -> Tensor:
        if hooks is not None:
            x = hooks.after_stack(self.side, x, states)
        if self.config.normalize_before:
            x = self.final_norm(x)
        return x


class Backbone(nn.Module):
    """Encoder-decoder Transformer; `forward` for training, `encode`/`decode_step` for
    incremental inference."""

    def __init__(self, config: BackboneConfig) -> None:
        super().__init__()
        self.config = config
        shared: nn.Embedding | None = None
        if config.shared_embeddings == "all":
            self.embed = nn.Embedding(config.tgt_vocab_size, config.d_model)
            shared = self.embed
        self.encoder = Stack(config, "encoder", config.src_vocab_size, shared)
        self.decoder = Stack(config, "decoder", config.tgt_vocab_size, shared)
        if config.shared_embeddings == "none":
            self.output = nn.Linear(config.d_model, config.tgt_vocab_size, bias=False)
        if config.output_bias:
            self.output_bias = nn.Parameter(torch.zeros(config.tgt_vocab_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier for matrices, N(0, d^-1/2) for embeddings (scaled by sqrt(d) at use)."""
        for name, param in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(param)
            elif name.endswith("bias"):
                nn.init.zeros_(param)
            elif "embed" in name:
                nn.init.normal_(param, std=self.config.d_model ** -0.5)
            elif param.dim() == 2:
                nn.init.xavier_uniform_(param)

    def output_weight(self) -> Tensor:
        if self.config.shared_embeddings == "none":
            return self.output.weight
        return self.decoder.embedding().weight

    def logits(self, hidden: Tensor) -> Tensor:
        """hidden [..., d_model] -> [..., tgt_vocab]."""
        out = hidden @ self.output_weight().t()
        if self.config.output_bias:
            out = out + self.output_bias
        return out

    def decoder_layers(self) -> list[DecoderLayer]:
        return [cast(DecoderLayer, layer) for layer in self.decoder.layers]

    def encode(self, src_ids: Tensor, hooks: ModuleHooks | None = None) -> tuple[Tensor, Tensor]:
        """src_ids [batch, src_len] -> (memory [batch, src_len, d], mask [batch, 1, 1, src_len])."""
        mask = (src_ids != self.config.pad_id)[:, None, None, :]
        x = self.encoder.embed_ids(src_ids, 0, hooks)
        collect = hooks is not None and hooks.needs_layer_states
        states: list[Tensor] = []
        for index, layer in enumerate(self.encoder.layers):
            x = layer(x, mask, hooks.projections("encoder", index) if hooks is not None else None)
            if hooks is not None:
                x = hooks.after_layer("encoder", index, x)
            if collect:
                states.append(x)
        return self.encoder.finish(x, states, hooks), mask

    def start_state(self, memory: Tensor, mask: Tensor,
                    hooks: ModuleHooks | None = None) -> DecoderState:
        """Project the cross-attention keys/values once for the whole decode; `hooks` has
        the rows of `memory` (the same as `encode`'s)."""
        state = DecoderState(memory_mask=mask,
                             self_cache=SelfAttentionCache(self.config.decoder_layers))
        state.set_memory_mask(mask, memory.dtype)
        for index, layer in enumerate(self.decoder_layers()):
            k, v = layer.cross_attn.project_kv(
                memory, hooks.projections("decoder", index) if hooks is not None else None)
            # Contiguous once here, or every step's matmul would copy them.
            state.layers.append(LayerCache(cross_k=k.contiguous(), cross_v=v.contiguous()))
        return state

    def decode(self, tgt_ids: Tensor, memory: Tensor, mask: Tensor,
               hooks: ModuleHooks | None = None, state: DecoderState | None = None) -> Tensor:
        """Decoder hidden states [batch, tgt_len, d]. With `state`, tgt_ids is the next
        position only ([batch, 1]) and caches grow; without, teacher forcing."""
        offset = state.length if state is not None else 0
        if state is not None and state.cache_order is not None:
            tgt_ids = tgt_ids.index_select(0, state.cache_order)  # rows in cache order
        x = self.decoder.embed_ids(tgt_ids, offset, hooks,
                                   state.position if state is not None else None)
        collect = hooks is not None and hooks.needs_layer_states
        states: list[Tensor] = []
        for index, layer in enumerate(self.decoder_layers()):
            project = hooks.projections("decoder", index) if hooks is not None else None
            if state is not None:
                cache = state.layers[index]
                x = layer(x, cache.cross_k, cache.cross_v, state.memory_bias, state, project)
            else:
                k, v = layer.cross_attn.project_kv(memory, project)
                x = layer(x, k, v, mask, None, project)
            if hooks is not None:
                x = hooks.after_layer("decoder", index, x)
            if collect:
                states.append(x)
        if state is not None:
            state.length += tgt_ids.shape[1]
        hidden = self.decoder.finish(x, states, hooks)
        if state is not None and state.slots is not None:
            hidden = hidden.index_select(0, state.slots)  # back in row order
        return hidden

    def decode_step(self, tokens: Tensor, state: DecoderState,
                    hooks: ModuleHooks | None = None) -> Tensor:
        """tokens [batch] (the previous output) -> next-token logits [batch, vocab]."""
        hidden = self.decode(tokens[:, None], torch.empty(0), state.memory_mask, hooks, state)
        return self.logits(hidden[:, -1])

    def forward(self, src_ids: Tensor, tgt_in: Tensor,
                hooks: ModuleHooks | None = None) -> Tensor:
        """Teacher forcing: logits [batch, tgt_len, vocab]."""
        memory, mask = self.encode(src_ids, hooks)
        return self.logits(self.decode(tgt_in, memory, mask, hooks))
