"""Tiny models and vocabularies built in fixtures: no downloads, no shared data."""

from __future__ import annotations

import io
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import sentencepiece as spm
import torch

from contract.backbone import BackboneConfig
from model_store import Store
from server.engine.artifacts import backbone_files, build_engine, module_files
from server.engine.backbone import Backbone
from server.engine.engine import Engine, EngineOptions
from server.engine.families import Params, get_family
from server.engine.families.mixing import WordMixing

ENGLISH = [
    "the patient takes one tablet a day", "do not use this medicine after the expiry date",
    "the council adopted this regulation", "member states shall comply with this directive",
    "click the button to open a file", "the window shows the list of files",
    "i love you", "where are you going tonight", "we will talk about science today",
    "thank you very much for listening", "in the name of god the merciful",
    "the dose must be adjusted for children", "this decision is addressed to the member states",
]
FRENCH = [
    "le patient prend un comprimé par jour", "n'utilisez pas ce médicament après la date",
    "le conseil a adopté ce règlement", "les états membres se conforment à cette directive",
    "cliquez sur le bouton pour ouvrir un fichier", "la fenêtre affiche la liste des fichiers",
    "je t'aime", "où vas-tu ce soir", "nous allons parler de science aujourd'hui",
    "merci beaucoup de votre écoute", "au nom de dieu le miséricordieux",
    "la dose doit être ajustée chez les enfants", "cette décision est adressée aux états membres",
]


@cache
def spm_bytes(vocab_size: int = 120) -> bytes:
    """A tiny joint sentencepiece model (pad=0, unk=1, bos=2, eos=3), trained in memory."""
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter((ENGLISH + FRENCH) * 4), model_writer=out,
        vocab_size=vocab_size, model_type="unigram", character_coverage=1.0,
        pad_id=0, unk_id=1, bos_id=2, eos_id=3, minloglevel=2, hard_vocab_limit=False)
    return out.getvalue()


def tiny_config(**overrides: object) -> BackboneConfig:
    values: dict[str, object] = dict(
        src_vocab_size=120, tgt_vocab_size=120, d_model=32, n_heads=4, d_ff=64,
        encoder_layers=2, decoder_layers=2, dropout=0.0, pad_id=0, unk_id=1, eos_id=3,
        decoder_start_id=2, max_positions=128)
    values.update(overrides)
    return BackboneConfig(**values)  # type: ignore[arg-type]


def random_backbone(config: BackboneConfig, seed: int = 0, std: float = 0.3) -> Backbone:
    """Random weights large enough that outputs depend on the input."""
    torch.manual_seed(seed)
    model = Backbone(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if not name.endswith("norm.weight"):
                param.normal_(0.0, std)
    return model.eval()


def tiny_backbone_files(config: BackboneConfig | None = None, seed: int = 0) -> dict[str, bytes]:
    config = config or tiny_config()
    model = random_backbone(config, seed)
    data = spm_bytes()
    return backbone_files(config, model.state_dict(), source_spm=data, target_spm=data)


def random_module(config: BackboneConfig, family: str, seed: int, std: float = 0.3,
                  weights: Params | None = None,
                  **options: object) -> tuple[dict[str, object], Params]:
    """A module of `family` with random (non-identity) weights. Families that replace the
    backbone's projections start from copies of them and need the backbone's `weights`:
    their random module is the fresh one plus noise (a trained one stays near the backbone).
    Other families ignore `weights`."""
    chosen = get_family(family)
    module_config = chosen.normalise({"family": family, **options})
    generator = torch.Generator().manual_seed(seed)
    fresh = chosen.initial(config, module_config, generator, weights=weights)
    noise = {k: torch.randn(v.shape, generator=generator) * std for k, v in fresh.items()}
    if "project" not in chosen.sites:
        return module_config, noise
    return module_config, {k: fresh[k] + noise[k] for k in fresh}


def adapter_engine(options: EngineOptions, count: int = 3) -> Engine:
    """A tiny engine with `count` random residual adapters registered as m1, m2, ..."""
    engine = build_engine(tiny_backbone_files(), options)
    for seed in range(1, count + 1):
        engine.register_module(f"m{seed}", *random_module(tiny_config(), "adapter", seed=seed,
                                                          bottleneck=8))
    return engine


def publish_word_mixture(root: Path, name: str, *, backbone: str, domains: Sequence[str],
                         spread: float) -> None:
    """A word-level mixture (family "mixing") over `domains`, for the tiny backbone of
    seed 0 published as `backbone`, its mixing weights perturbed by noise of `spread` so
    that proportions differ between words; published and activated as `name`."""
    family = WordMixing()
    config = family.normalise({"family": "mixing", "domains": list(domains), "sides": "both"})
    weights = random_backbone(tiny_config(), 0).state_dict()  # tiny_backbone_files()'s
    params = family.initial(tiny_config(), config, torch.Generator(), weights=weights)
    generator = torch.Generator().manual_seed(3)
    for key, tensor in params.items():
        if key.endswith((".w", ".r")):
            tensor.add_(torch.randn(tensor.shape, generator=generator) * spread)
    with Store.open(root, builtin_dir=None) as store:
        fingerprint = store.record("backbone", backbone).fingerprint
        manifest = store.publish("module", name, module_files(params), config=config,
                                 backbone_fingerprint=fingerprint)
        store.activate("module", name, manifest.version)
