"""Transformer building blocks: attention with key/value caching, feed-forward, positions."""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contract.backbone import BackboneConfig
from server.engine.hooks import Linear, Project


def apply(project: Project | None, name: str, x: Tensor, linear: Linear) -> Tensor:
    """`linear(x)`, or what the batch's modules make of it at projection site `name`."""
    return linear(x) if project is None else project(name, x, linear)


def activation_fn(name: str) -> nn.Module:
    if name == "relu":
        return nn.ReLU()
    if name == "gelu":
        return nn.GELU()
    if name == "gelu_tanh":
        return nn.GELU(approximate="tanh")
    if name == "swish":
        return nn.SiLU()
    raise ValueError(f"unknown activation {name!r}")


def sinusoidal_table(n_positions: int, dim: int, *, interleaved: bool) -> Tensor:
    """Fixed position encodings from position 0; `interleaved` alternates sin/cos
    (OpenNMT-py), otherwise all sines then all cosines (Marian). CTranslate2's built-in
    table uses other timescales and starts at 1, so exports pass this table explicitly."""
    position = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float64) * -(math.log(10000.0) / dim))
    angles = position * inv_freq  # [n_positions, dim/2]
    table = torch.zeros(n_positions, dim, dtype=torch.float64)
    if interleaved:
        table[:, 0::2] = torch.sin(angles)
        table[:, 1::2] = torch.cos(angles)
    else:
        half = dim // 2
        table[:, :half] = torch.sin(angles)
        table[:, half:] = torch.cos(angles[:, : dim - half])
    return table.float()


class Positions(nn.Module):
    """Position encodings added to token embeddings; learned or sinusoidal."""

    def __init__(self, config: BackboneConfig) -> None:
        super().__init__()
        self.learned = config.positions == "learned"
        if self.learned:
            self.weight = nn.Parameter(torch.zeros(config.max_positions, config.d_model))
        else:
            table = sinusoidal_table(config.max_positions, config.d_model,
                                     interleaved=config.positions == "sinusoidal_interleaved")
            self.register_buffer("table", table, persistent=False)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        source = cast(Tensor, self.weight if self.learned else self.table)
        if offset + length > source.shape[0]:
            raise ValueError(f"sequence of {offset + length} positions exceeds max_positions "
                             f"{source.shape[0]}")
        return source[offset: offset + length]  # [length, d_model]

    def at(self, position: Tensor) -> Tensor:
        """The encodings of `position` (a tensor on the table's device: one element, or
        [rows, 1], each row at its own position): [*position.shape, d_model]. No bound
        check (it would read the value back); callers keep it in range."""
        source = cast(Tensor, self.weight if self.learned else self.table)
        return source.index_select(0, position.flatten()).view(*position.shape, -1)


INCREMENTAL_QUERIES = 16  # up to this many query positions, `attention_step` is used


def attention_step(q: Tensor, key: Tensor, value: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(q k^T / sqrt(d)) v for a few query positions (a decoding step); `mask` is
    boolean (True = attend) or an additive bias (0 or -inf). Same maths as
    `F.scaled_dot_product_attention`."""
    scores = torch.matmul(q, key.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, -float("inf"))
    elif mask is not None:
        scores = scores.add_(mask)
    return torch.matmul(torch.softmax(scores, dim=-1), value)


RowRun = tuple[int, int, int]  # rows [start, end) attend over their first `positions` keys


def attention_step_runs(q: Tensor, key: Tensor, value: Tensor, bias: Tensor,
                        runs: list[RowRun]) -> Tensor:
    """`attention_step` of rows that attend over different numbers of positions (live rows
    of different ages): each run of rows reads only its own oldest row's positions instead
    of the whole batch's, the rest of its span masked by `bias` as before. Masked positions
    add exact zeros, so a row's result is its one-run result."""
    parts = [attention_step(q[start:end], key[start:end, :, :positions],
                            value[start:end, :, :positions], bias[start:end, ..., :positions])
             for start, end, positions in runs]
    return parts[0] if len(parts) == 1 else torch.cat(parts)


class Attention(nn.Module):
    """Multi-head attention; projections q/k/v/o with biases (Marian, OpenNMT-py)."""

    def __init__(self, config: BackboneConfig, name: str) -> None:
        super().__init__()
        d = config.d_model
        self.name = name  # "self_attn" or "cross_attn": the projection sites' prefix
        self.n_heads = config.n_heads
        self.head_dim = config.head_dim
        self.dropout = config.attention_dropout
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        self.v_proj = nn.Linear(d, d)
        self.o_proj = nn.Linear(d, d)

    def split_heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)

    def fuse_qkv(self, fused: Linear) -> None:
        """Inference: `fused(x)` is q, k and v of `x` side by side (one [3d, d] matmul
        instead of three; the engine builds it from these weights). Kept off the module
        tree, so state dicts and exports never see it."""
        object.__setattr__(self, "_fused_qkv", fused)

    def project_qkv(self, x: Tensor, project: Project | None = None
                    ) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of `x` (self-attention): each [batch, heads, len,
        head_dim]. One fused matmul when the engine built one and no module overrides a
        projection of this layer (and no gradient flows)."""
        fused: Linear | None = self.__dict__.get("_fused_qkv")
        if fused is None or project is not None or torch.is_grad_enabled():
            k, v = self.project_kv(x, project)
            return self.split_heads(apply(project, f"{self.name}.q", x, self.q_proj)), k, v
        q, k, v = fused(x).chunk(3, dim=-1)
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)

    def project_kv(self, x: Tensor, project: Project | None = None) -> tuple[Tensor, Tensor]:
        """Keys and values of `x`: each [batch, heads, len, head_dim]."""
        return (self.split_heads(apply(project, f"{self.name}.k", x, self.k_proj)),
                self.split_heads(apply(project, f"{self.name}.v", x, self.v_proj)))

    def attend_runs(self, key: Tensor, value: Tensor, bias: Tensor, runs: list[RowRun], *,
                    q: Tensor, project: Project | None = None) -> Tensor:
        """A decoding step's self-attention over rows in runs of their own spans
        (`attention_step_runs`); q: [rows, heads, 1, head_dim]."""
        batch, heads, length, dim = q.shape
        out = attention_step_runs(q, key, value, bias, runs)
        out = out.transpose(1, 2).reshape(batch, length, heads * dim)
        return apply(project, f"{self.name}.o", out, self.o_proj)

    def attend(self, query: Tensor, key: Tensor, value: Tensor, *, mask: Tensor | None,
               causal: bool = False, group_size: int = 1,
               project: Project | None = None, q: Tensor | None = None) -> Tensor:
        """query [batch, q_len, d]; key/value [batch / group_size, heads, kv_len, head_dim]:
        with group_size > 1, each run of `group_size` query rows (the beams of one source)
        shares one key/value row, attended as extra query positions (no copies). `q`: the
        query's heads when already projected (`project_qkv`)."""
        if q is None:
            q = self.split_heads(apply(project, f"{self.name}.q", query, self.q_proj))
        batch, heads, length, dim = q.shape
        if group_size > 1:  # [groups, heads, group_size * q_len, head_dim]
            q = q.view(batch // group_size, group_size, heads, length, dim).transpose(1, 2)
            q = q.reshape(batch // group_size, heads, group_size * length, dim)
        if self.training or causal or q.shape[2] > INCREMENTAL_QUERIES:
            out = F.scaled_dot_product_attention(
                q, key, value, attn_mask=mask, is_causal=causal and mask is None,
                dropout_p=self.dropout if self.training else 0.0)
        else:  # a decoding step: plain matmuls beat the fused kernel's setup ~2.5x here
            out = attention_step(q, key, value, mask)
        if group_size > 1:
            out = out.view(batch // group_size, heads, group_size, length, dim).transpose(1, 2)
            out = out.reshape(batch, heads, length, dim)
        out = out.transpose(1, 2).reshape(batch, length, heads * dim)
        return apply(project, f"{self.name}.o", out, self.o_proj)  # [batch, q_len, d_model]


class FeedForward(nn.Module):
    def __init__(self, config: BackboneConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.d_ff)
        self.fc2 = nn.Linear(config.d_ff, config.d_model)
        self.activation = activation_fn(config.activation)
        self.dropout = nn.Dropout(config.activation_dropout)

    def forward(self, x: Tensor, project: Project | None = None) -> Tensor:
        if project is None:
            return self.fc2(self.dropout(self.activation(self.fc1(x))))
        h = self.dropout(self.activation(project("ffn.fc1", x, self.fc1)))
        return project("ffn.fc2", h, self.fc2)
