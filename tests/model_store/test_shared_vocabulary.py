"""A backbone whose target vocabulary is its source one ships it once: no target.spm means
"the same as source.spm" (contract/artifacts.py). Writers produce that form whenever both
sides are the same bytes, loaders read both forms, the fingerprint does not depend on the
form, and a malformed one is refused on load with a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contract.artifacts import SOURCE_SPM_FILE, TARGET_SPM_FILE, TARGET_VOCAB_FILE
from model_store import ArtifactError, Store
from server.engine.artifacts import backbone_files, backbone_parts, build_engine
from tests.tiny import random_backbone, spm_bytes, tiny_backbone_files, tiny_config

TEXT = "the patient takes one tablet a day"


def two_files() -> dict[str, bytes]:
    """The form shipped before: the same vocabulary as source.spm and target.spm."""
    files = tiny_backbone_files()
    return {**files, TARGET_SPM_FILE: files[SOURCE_SPM_FILE]}


def test_writers_ship_one_vocabulary_file_when_both_sides_are_the_same() -> None:
    config = tiny_config()
    weights = random_backbone(config).state_dict()
    other = spm_bytes(100)  # another vocabulary: both files stay

    shared = backbone_files(config, weights, source_spm=spm_bytes(), target_spm=spm_bytes())
    separate = backbone_files(config, weights, source_spm=spm_bytes(), target_spm=other)

    assert SOURCE_SPM_FILE in shared and TARGET_SPM_FILE not in shared
    assert separate[TARGET_SPM_FILE] == other


def test_both_forms_have_one_fingerprint_and_translate_alike(tmp_path: Path) -> None:
    one = tiny_backbone_files()
    with Store.open(tmp_path, builtin_dir=None) as store:
        config = json.loads(one["config.json"])
        old = store.publish("backbone", "two-files", two_files(), config=config)
        new = store.publish("backbone", "one-file", one, config=config)
        loaded = [store.load("backbone", name, 1).files for name in ("two-files", "one-file")]

    assert TARGET_SPM_FILE not in one
    assert old.backbone_fingerprint == new.backbone_fingerprint
    parts = [backbone_parts(files) for files in loaded]
    ids = [p.target_tokenizer.encode([TEXT]) for p in parts]
    assert ids[0] == ids[1] and parts[1].target_tokenizer.decode(ids[1][0]) == TEXT
    outputs = [build_engine(files).translate_texts([TEXT]) for files in loaded]
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(("change", "said"), [
    ({TARGET_VOCAB_FILE: b"a\nb\n"}, "target.vocab without target.spm"),
    ({"config": {"tgt_vocab_size": 130, "shared_embeddings": "decoder"}},
     "the target vocabulary is the source one, but src_vocab_size (120) != "
     "tgt_vocab_size (130)"),
])
def test_a_malformed_shared_vocabulary_is_refused_with_a_clear_error(
        tmp_path: Path, change: dict[str, object], said: str) -> None:
    files = tiny_backbone_files()
    overrides = change.get("config", {})
    assert isinstance(overrides, dict)
    config = json.loads(files["config.json"]) | overrides
    files = {**files, "config.json": json.dumps(config).encode(),
             **{k: v for k, v in change.items() if isinstance(v, bytes)}}
    with Store.open(tmp_path, builtin_dir=None) as store, \
            pytest.raises(ArtifactError) as raised:
        store.publish("backbone", "bad", files, config=config)  # verified once staged
    assert said in str(raised.value)
    with pytest.raises(ValueError, match="backbone artifact: .*" + said.split(" (")[0]):
        backbone_parts(files)
