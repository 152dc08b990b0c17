"""en->de builds and ships no router: the server routes its English with en->fr's
(server/routing/shared_router.py). Its classifier stage trains nothing, its publish stage
writes its backbone (one vocabulary file), modules and card but no router even when the
run dir holds one, `publish-router` refuses, and the card names the router it uses."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from contract.artifacts import SOURCE_SPM_FILE, TARGET_SPM_FILE
from tests.trainer.builtin_directions import build_en_fr, fr_en_run_dir
from tests.trainer.test_recipe_en_de import backbone_args
from trainer.recipes import default_en_fr as recipe
from trainer.recipes.direction_publication import publish_direction, publish_direction_router
from trainer.recipes.directions import EN_DE

NAME = EN_DE.backbone_name


def test_the_classifier_stage_builds_no_router_for_en_de(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    args = backbone_args(tmp_path)
    args.run_dir.mkdir()
    with caplog.at_level(logging.INFO, logger="trainer.recipes.default_en_fr"):
        recipe.run_stages(args, ("classifier",), threading.Event(), EN_DE)
    assert not (args.run_dir / "classifier").exists()
    assert "en-de builds no router: the server routes it with en-fr's" in caplog.text


def test_publishing_en_de_ships_no_router_and_one_vocabulary_file(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    build_en_fr(builtin, tmp_path / "factory")
    run_dir = fr_en_run_dir(tmp_path)  # a run dir after its stages, a router included
    assert (run_dir / "classifier" / "classifier.bin").is_file()

    written = publish_direction(tmp_path / "data", run_dir, builtin, EN_DE,
                                snapshot=tmp_path / "no-snapshot")

    assert [p.relative_to(builtin).as_posix() for p in written] == [
        f"backbones/{NAME}/v1", f"directions/{NAME}/modules/medical/v1"]
    backbone = builtin / "backbones" / NAME / "v1"
    assert (backbone / SOURCE_SPM_FILE).is_file() and not (backbone / TARGET_SPM_FILE).exists()
    card = (builtin / "MODEL_CARD-en-de.md").read_text()
    assert "and the English router of default-en-fr." in card
    assert "- router: none of its own. The server routes its English text with the " \
           "English→French direction's router" in card
    assert "fastText supervised classifier" not in card and "dev accuracy" not in card
    with pytest.raises(ValueError, match="en-de ships no router"):
        publish_direction_router(run_dir, builtin, EN_DE)
