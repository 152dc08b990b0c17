"""Artifact kinds and the files each kind holds (docs/ARCHITECTURE.md, "Artifacts").

Every module that reads or writes an artifact file names it through these constants.
"""

from __future__ import annotations

from typing import Literal, get_args

ArtifactKind = Literal["backbone", "module", "classifier"]
KINDS: tuple[ArtifactKind, ...] = get_args(ArtifactKind)

MANIFEST_FILE = "manifest.json"

# backbone
BACKBONE_CONFIG_FILE = "config.json"  # BackboneConfig as JSON (contract.backbone)
BACKBONE_WEIGHTS_FILE = "model.safetensors"
SOURCE_SPM_FILE = "source.spm"
TARGET_SPM_FILE = "target.spm"  # may be byte-identical to source.spm
SOURCE_VOCAB_FILE = "source.vocab"  # optional: one piece per line, line number = model id
TARGET_VOCAB_FILE = "target.vocab"  # optional

# module: its config is the manifest's `config` (contract.families)
MODULE_WEIGHTS_FILE = "module.safetensors"

# classifier: a fastText supervised model; the manifest's `config.labels` lists domains
CLASSIFIER_MODEL_FILE = "classifier.bin"
# optional: its training examples as hashed features, no text (trainer/routers/features.py)
CLASSIFIER_FEATURES_FILE = "features.npz.xz"
# older classifiers' examples as label TAB text: read only to retrain them into features
CLASSIFIER_EXAMPLES_FILE = "examples.tsv.gz"

BACKBONE_FILES: tuple[str, ...] = (BACKBONE_CONFIG_FILE, BACKBONE_WEIGHTS_FILE,
                                   SOURCE_SPM_FILE, TARGET_SPM_FILE)

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
