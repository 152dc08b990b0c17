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
from typing import cast

import torch
from torch import Tensor, nn

from contract.backbone import BackboneConfig
from server.engine.decode_state import DecoderState, LayerCache, SelfAttentionCache
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
        if state.row_runs is not None and state.self_bias is not None:
            return self.self_attn.attend_runs(k, v, state.self_bias, state.row_runs, q=q,
                                              project=project)
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
