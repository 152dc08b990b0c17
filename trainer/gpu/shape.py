"""The backbone shape of the GPU-trained default, and the shapes it was chosen among.

The choice (benchmarks/results/gpu_backbone_shape.md): the largest backbone that keeps the
repository under 60 MB with a 2 MB margin once published beside fr->en
(trainer/gpu/repository_budget.py) and decodes on the CPU at no less than half the speed
of the shape it replaces. A deeper decoder was the better use of parameters at equal compute
(benchmarks/results/backbone_shapes.md); depth costs decoding speed, width mostly storage.
"""

from __future__ import annotations

from dataclasses import replace

from contract.backbone import BackboneConfig
from trainer.training.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID

VOCAB_SIZE = 8000  # the recipe's joint sentencepiece: the GPU run keeps its vocabulary

# The CPU-trained default's shape (trainer/recipes/default_en_fr.py, backbone v4).
TODAY = BackboneConfig(
    src_vocab_size=VOCAB_SIZE, tgt_vocab_size=VOCAB_SIZE, d_model=256, n_heads=4, d_ff=1024,
    encoder_layers=6, decoder_layers=3, activation="relu", normalize_before=True,
    positions="sinusoidal", max_positions=512, scale_embedding=True, shared_embeddings="all",
    output_bias=False, dropout=0.1, pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID,
    decoder_start_id=BOS_ID)


def _wide(d_model: int, encoder_layers: int, decoder_layers: int) -> BackboneConfig:
    """64-dimensional heads and a 4x FFN, as the Transformer base has."""
    return replace(TODAY, d_model=d_model, n_heads=d_model // 64, d_ff=4 * d_model,
                   encoder_layers=encoder_layers, decoder_layers=decoder_layers)


CANDIDATES: dict[str, BackboneConfig] = {
    "today-256-6+3": TODAY,
    "256-5+3": _wide(256, 5, 3),
    "384-4+3": _wide(384, 4, 3),
    "384-5+3": _wide(384, 5, 3),
    "384-6+3": _wide(384, 6, 3),
    "384-6+4": _wide(384, 6, 4),
    "384-8+4": _wide(384, 8, 4),
    "384-6+6": _wide(384, 6, 6),
    "448-4+2": _wide(448, 4, 2),
    "448-6+3": _wide(448, 6, 3),
    "512-4+3": _wide(512, 4, 3),
}


def parameter_count(config: BackboneConfig) -> int:
    """Weights of a backbone of this shape (no module built: counted from the shapes)."""
    d, f = config.d_model, config.d_ff
    norm = 2 * d
    attention = 4 * (d * d + d)
    ffn = d * f + f + f * d + d
    encoder = config.encoder_layers * (attention + ffn + 2 * norm)
    decoder = config.decoder_layers * (2 * attention + ffn + 3 * norm)
    final = 2 * norm if config.normalize_before else 0
    return config.src_vocab_size * d + encoder + decoder + final


# The shape the GPU run trains by default (benchmarks/results/gpu_backbone_shape.md): the
# largest that fits the repository. Since en->de ships beside en->fr and fr->en, that is
# today's shape (384-5+3, chosen while two directions shipped, would take it to 68.8 MB):
# the GPU's gain is then the passes over the data (the CPU-trained backbone saw 0.65).
CHOSEN = "today-256-6+3"
# What to train instead when the repository has grown past CHOSEN's margin
# (`python -m trainer.gpu.repository_budget --all` says which shapes still fit).
FALLBACK = "256-5+3"
