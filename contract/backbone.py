"""The backbone's declarative configuration: every architectural choice is a field here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

Activation = Literal["relu", "gelu", "gelu_tanh", "swish"]
Positions = Literal["sinusoidal", "sinusoidal_interleaved", "learned"]
SharedEmbeddings = Literal["none", "decoder", "all"]

ACTIVATIONS: tuple[str, ...] = ("relu", "gelu", "gelu_tanh", "swish")
POSITIONS: tuple[str, ...] = ("sinusoidal", "sinusoidal_interleaved", "learned")
SHARED_EMBEDDINGS: tuple[str, ...] = ("none", "decoder", "all")


class ConfigError(ValueError):
    """A configuration that cannot describe a valid backbone; lists every problem."""


@dataclass(frozen=True)
class BackboneConfig:
    """A Transformer encoder-decoder.

    `normalize_before` selects pre-norm (OpenNMT-py) over post-norm (Marian / OPUS-MT).
    `shared_embeddings`: "none" (three matrices), "decoder" (decoder input == output
    projection), "all" (encoder, decoder and output projection share one matrix; requires
    equal vocabularies).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    encoder_layers: int = 6
    decoder_layers: int = 6
    activation: Activation = "relu"
    normalize_before: bool = False
    positions: Positions = "sinusoidal"
    max_positions: int = 1024
    scale_embedding: bool = True
    shared_embeddings: SharedEmbeddings = "all"
    output_bias: bool = False
    layer_norm_eps: float = 1e-5
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    pad_id: int = 0
    eos_id: int = 2
    unk_id: int = 1
    decoder_start_id: int = 0
    source_eos: bool = True  # Marian appends </s> to sources; OpenNMT-py v3 does not

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ConfigError("invalid backbone config: " + "; ".join(problems))

    def problems(self) -> list[str]:
        """Every reason this config is invalid (empty when it is valid)."""
        found: list[str] = []
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff",
                     "encoder_layers", "decoder_layers", "max_positions"):
            if getattr(self, name) < 1:
                found.append(f"{name} must be >= 1 (got {getattr(self, name)})")
        if self.n_heads >= 1 and self.d_model % self.n_heads:
            found.append(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.activation not in ACTIVATIONS:
            found.append(f"activation {self.activation!r} not in {ACTIVATIONS}")
        if self.positions not in POSITIONS:
            found.append(f"positions {self.positions!r} not in {POSITIONS}")
        if self.shared_embeddings not in SHARED_EMBEDDINGS:
            found.append(f"shared_embeddings {self.shared_embeddings!r} not in {SHARED_EMBEDDINGS}")
        if self.shared_embeddings == "all" and self.src_vocab_size != self.tgt_vocab_size:
            found.append("shared_embeddings='all' needs src_vocab_size == tgt_vocab_size")
        for name in ("pad_id", "eos_id", "unk_id", "decoder_start_id"):
            value = getattr(self, name)
            if not 0 <= value < self.tgt_vocab_size:
                found.append(f"{name} ({value}) outside the target vocabulary")
        return found

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackboneConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown backbone config keys {unknown}; known: {sorted(known)}")
        return cls(**data)
