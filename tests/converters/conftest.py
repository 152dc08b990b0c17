"""Tiny external checkpoints, built once per module: a Marian directory (safetensors and
pickle layouts) and an OpenNMT-py checkpoint with its sentencepiece model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import MarianMTModel

from tests.converters.marian_fixture import marian_model, save_marian
from tests.converters.opennmt_fixture import opennmt_checkpoint
from tests.tiny import spm_bytes


@pytest.fixture(scope="module")
def marian() -> MarianMTModel:
    return marian_model(activation="swish")


@pytest.fixture(scope="module")
def marian_dir(marian: MarianMTModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_marian(marian, tmp_path_factory.mktemp("marian"))


@pytest.fixture(scope="module")
def marian_bin_dir(marian: MarianMTModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_marian(marian, tmp_path_factory.mktemp("marian-bin"), binary=True)


@pytest.fixture(scope="module")
def spm_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("spm") / "joint.spm"
    path.write_bytes(spm_bytes())
    return path


@pytest.fixture(scope="module")
def opennmt_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("opennmt") / "model.pt"
    torch.save(opennmt_checkpoint(activation="gelu"), path)
    return path
