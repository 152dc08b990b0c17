"""A random-weight Marian checkpoint (the benchmark backbone) and its conversions.

The checkpoint is a Hugging Face `MarianMTModel` saved the way OPUS-MT models are
(`config.json`, `model.safetensors`, `source.spm`, `target.spm`, `vocab.json`), so the
peers import it with their own tools: `ctranslate2.converters.TransformersConverter`
for CTranslate2, `converters.marian.convert_marian` for this engine.

vocab.json follows Marian's layout: `</s>` = 0, `<unk>` = 1, the sentencepiece pieces,
filler pieces up to the requested size when the sentencepiece model came out smaller,
and `<pad>` last (it is also the decoder start token).
"""

from __future__ import annotations

import io
import json
import random
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm
import torch
from transformers import MarianConfig, MarianMTModel

EOS, UNK, PAD = "</s>", "<unk>", "<pad>"
SPM_SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")


@dataclass(frozen=True)
class ModelSize:
    """Transformer sizes; the default is Transformer-base (about 48M parameters at 8k)."""

    d_model: int = 512
    layers: int = 6  # encoder and decoder each
    heads: int = 8
    ffn: int = 2048
    vocab: int = 8000
    max_positions: int = 512


BASE = ModelSize()
TINY = ModelSize(d_model=32, layers=2, heads=4, ffn=64, vocab=200, max_positions=512)


@dataclass(frozen=True)
class Checkpoint:
    """A saved Marian checkpoint directory and its vocabulary (model id -> piece)."""

    path: Path
    vocab: list[str]

    @property
    def eos_id(self) -> int:
        return self.vocab.index(EOS)

    @property
    def pad_id(self) -> int:
        return self.vocab.index(PAD)


def synthetic_lines(count: int, *, seed: int = 0) -> list[str]:
    """Pseudo-sentences over a syllable inventory: enough distinct words to train a
    sentencepiece model of several thousand pieces without any corpus."""
    rng = random.Random(seed)
    onsets = ["", "b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v", "br",
              "tr", "pl", "ch", "st", "gr"]
    nuclei = ["a", "e", "i", "o", "u", "ai", "ou", "ei", "ea", "io"]
    codas = ["", "", "n", "s", "r", "l", "t", "m", "x", "nt"]
    syllables = [o + n + c for o in onsets for n in nuclei for c in codas]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(20_000)]
    return [" ".join(rng.choices(words, k=rng.randint(6, 30))) for _ in range(count)]


def train_spm(lines: Iterable[str], vocab_size: int) -> bytes:
    """A unigram sentencepiece model (a soft size limit: small corpora give fewer pieces)."""
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=out, vocab_size=vocab_size,
        model_type="unigram", character_coverage=1.0, pad_id=0, unk_id=1, bos_id=2,
        eos_id=3, minloglevel=2, hard_vocab_limit=False, input_sentence_size=200_000,
        shuffle_input_sentence=True, num_threads=2)
    return out.getvalue()


def marian_vocab(spm_model: bytes, size: int) -> list[str]:
    """Model ids -> pieces, Marian's layout, exactly `size` entries."""
    processor = spm.SentencePieceProcessor(model_proto=spm_model)
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    others = [p for p in pieces if p not in SPM_SPECIALS]
    if len(others) > size - 3:
        others = others[: size - 3]
    fillers = [f"\u2581filler{i}" for i in range(size - 3 - len(others))]
    return [EOS, UNK, *others, *fillers, PAD]


def marian_config(size: ModelSize) -> MarianConfig:
    vocab = size.vocab
    return MarianConfig(
        vocab_size=vocab, decoder_vocab_size=vocab, d_model=size.d_model,
        encoder_layers=size.layers, decoder_layers=size.layers,
        encoder_attention_heads=size.heads, decoder_attention_heads=size.heads,
        encoder_ffn_dim=size.ffn, decoder_ffn_dim=size.ffn,
        max_position_embeddings=size.max_positions, pad_token_id=vocab - 1, eos_token_id=0,
        decoder_start_token_id=vocab - 1, forced_eos_token_id=None,
        activation_function="swish", scale_embedding=True,
        share_encoder_decoder_embeddings=True, tie_word_embeddings=True, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0)


def random_marian(size: ModelSize, *, seed: int = 0) -> MarianMTModel:
    """A MarianMTModel with Hugging Face's random initialisation (fixed seed)."""
    torch.manual_seed(seed)
    model = MarianMTModel(marian_config(size))
    torch.nn.Module.eval(model)
    return model


def save_checkpoint(model: MarianMTModel, path: Path, *, spm_model: bytes,
                    vocab: Sequence[str]) -> Checkpoint:
    """Write the checkpoint directory the way OPUS-MT uploads look."""
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    (path / "source.spm").write_bytes(spm_model)
    (path / "target.spm").write_bytes(spm_model)
    pieces = {piece: index for index, piece in enumerate(vocab)}
    (path / "vocab.json").write_text(json.dumps(pieces, ensure_ascii=False), encoding="utf-8")
    return Checkpoint(path, list(vocab))


def build_checkpoint(path: Path, size: ModelSize, *, lines: Sequence[str] | None = None,
                     seed: int = 0) -> tuple[Checkpoint, MarianMTModel]:
    """Train the sentencepiece model (on `lines`, else synthetic text), build the random
    model and save both under `path`."""
    text = list(lines) if lines else synthetic_lines(max(2_000, size.vocab * 3), seed=seed)
    spm_model = train_spm(text, size.vocab)
    vocab = marian_vocab(spm_model, size.vocab)
    model = random_marian(size, seed=seed)
    return save_checkpoint(model, path, spm_model=spm_model, vocab=vocab), model


def quiet_libraries() -> None:
    """No progress bars or advice from transformers in the benchmark's output."""
    import transformers

    transformers.utils.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")


def convert_ct2(checkpoint: Checkpoint, out_dir: Path, *, quantization: str) -> Path:
    """CTranslate2's own Transformers converter on the checkpoint directory."""
    from ctranslate2.converters import TransformersConverter

    converter = TransformersConverter(str(checkpoint.path))
    converter.convert(str(out_dir), quantization=quantization, force=True)
    return out_dir


def source_batch(checkpoint: Checkpoint, *, batch: int, length: int,
                 seed: int = 0) -> list[list[int]]:
    """`batch` sources of exactly `length` model ids, the last one EOS; the others drawn
    from the ordinary pieces (never EOS, unknown, filler or padding)."""
    rng = random.Random(seed)
    usable = [i for i, piece in enumerate(checkpoint.vocab)
              if piece not in (EOS, UNK, PAD, *SPM_SPECIALS) and "filler" not in piece]
    return [[rng.choice(usable) for _ in range(length - 1)] + [checkpoint.eos_id]
            for _ in range(batch)]
