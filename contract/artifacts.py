"""Artifact kinds and the files each kind holds (docs/ARCHITECTURE.md, "Artifacts").

Every module that reads or writes an artifact file names it through these constants.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal, get_args

ArtifactKind = Literal["backbone", "module", "classifier"]
KINDS: tuple[ArtifactKind, ...] = get_args(ArtifactKind)

MANIFEST_FILE = "manifest.json"

# backbone
BACKBONE_CONFIG_FILE = "config.json"  # BackboneConfig as JSON (contract.backbone)
BACKBONE_WEIGHTS_FILE = "model.safetensors"
SOURCE_SPM_FILE = "source.spm"
# absent: the target vocabulary is the source one (source.spm, and source.vocab if any);
# a backbone with one vocabulary ships it once (`shared_vocabulary`)
TARGET_SPM_FILE = "target.spm"
SOURCE_VOCAB_FILE = "source.vocab"  # optional: one piece per line, line number = model id
TARGET_VOCAB_FILE = "target.vocab"  # optional; only beside target.spm

# module: its config is the manifest's `config` (contract.families)
MODULE_WEIGHTS_FILE = "module.safetensors"

# classifier: a fastText supervised model; the manifest's `config.labels` lists domains
CLASSIFIER_MODEL_FILE = "classifier.bin"
# optional: its training examples as hashed features, no text (trainer/routers/features.py)
CLASSIFIER_FEATURES_FILE = "features.npz.xz"
# older classifiers' examples as label TAB text: read only to retrain them into features
CLASSIFIER_EXAMPLES_FILE = "examples.tsv.gz"

BACKBONE_FILES: tuple[str, ...] = (BACKBONE_CONFIG_FILE, BACKBONE_WEIGHTS_FILE,
                                   SOURCE_SPM_FILE)

# Files every artifact of a kind must list.
REQUIRED_FILES: dict[ArtifactKind, tuple[str, ...]] = {
    "backbone": BACKBONE_FILES,
    "module": (MODULE_WEIGHTS_FILE,),
    "classifier": (CLASSIFIER_MODEL_FILE,),
}

# Files whose bytes define what a backbone computes: the weights and the id mapping.
# config.json is not listed: the config enters the fingerprint as canonical JSON instead,
# so formatting changes of the file do not change the fingerprint.
FINGERPRINT_FILES: tuple[str, ...] = (BACKBONE_WEIGHTS_FILE, SOURCE_SPM_FILE, TARGET_SPM_FILE,
                                      SOURCE_VOCAB_FILE, TARGET_VOCAB_FILE)


def shared_vocabulary(names: Collection[str]) -> bool:
    """A backbone whose target vocabulary is its source one: it has no target.spm."""
    return TARGET_SPM_FILE not in names


def target_vocabulary_files(names: Collection[str]) -> tuple[str, str]:
    """(sentencepiece model, piece list) the target side reads: target.spm and
    target.vocab, or source.spm and source.vocab for a shared vocabulary."""
    if shared_vocabulary(names):
        return SOURCE_SPM_FILE, SOURCE_VOCAB_FILE
    return TARGET_SPM_FILE, TARGET_VOCAB_FILE


def vocabulary_problems(names: Collection[str], config: Mapping[str, object]) -> list[str]:
    """What is wrong with a backbone's vocabulary files (`names`) for its `config`."""
    if not shared_vocabulary(names):
        return []
    problems = []
    if TARGET_VOCAB_FILE in names:
        problems.append(f"{TARGET_VOCAB_FILE} without {TARGET_SPM_FILE}: without "
                        f"{TARGET_SPM_FILE} the target vocabulary is the source one, so "
                        f"ship both target files or neither")
    if config.get("src_vocab_size") != config.get("tgt_vocab_size"):
        problems.append(f"no {TARGET_SPM_FILE}, so the target vocabulary is the source one, "
                        f"but src_vocab_size ({config.get('src_vocab_size')}) != "
                        f"tgt_vocab_size ({config.get('tgt_vocab_size')}): ship the target "
                        f"vocabulary as {TARGET_SPM_FILE}")
    return problems


def effective_vocabulary_hashes(hashes: Mapping[str, str]) -> dict[str, str]:
    """`hashes` (file -> sha256) with a shared vocabulary's target entries filled in from
    the source ones: a backbone shipped with one vocabulary file has the fingerprint of
    the same backbone shipped with two identical ones."""
    filled = dict(hashes)
    if shared_vocabulary(hashes) and SOURCE_SPM_FILE in hashes:
        filled[TARGET_SPM_FILE] = hashes[SOURCE_SPM_FILE]
        if SOURCE_VOCAB_FILE in hashes:
            filled[TARGET_VOCAB_FILE] = hashes[SOURCE_VOCAB_FILE]
    return filled
