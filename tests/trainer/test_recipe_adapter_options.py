"""The adapters stage's options (a domain's bottleneck, the peak learning rate, a step
budget) and what the published model card says of each adapter."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import save_file

from tests.tiny import random_module, tiny_config
from tests.trainer.test_default_recipe import published_builtin, trained_run_dir
from trainer.recipes.default_en_fr import _bottleneck
from trainer.recipes.publication import publish_builtin

REPO = Path(__file__).resolve().parents[2]


def test_a_bottleneck_option_names_a_domain_and_a_size() -> None:
    assert _bottleneck("law=256") == ("law", 256)
    for bad in ("law", "law=", "news=256", "law=0", "law=4096", "law=big", "=128"):
        with pytest.raises(argparse.ArgumentTypeError, match="DOMAIN=SIZE"):
            _bottleneck(bad)


def test_the_recipe_refuses_a_bad_bottleneck_before_training_anything(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainer.recipes.default_en_fr", "--stage", "adapters",
         "--run-dir", str(tmp_path / "run"), "--adapter-bottleneck", "news=256"],
        cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "'news=256' is not DOMAIN=SIZE with a domain of medical, law" in done.stderr
    assert not (tmp_path / "run").exists()


def test_the_card_gives_each_adapters_bottleneck_and_learning_rate(tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)
    run_dir = trained_run_dir(tmp_path, builtin)  # medical: bottleneck 4, lr not recorded
    medical = json.loads((run_dir / "adapters" / "medical" / "result.json").read_text())
    config, params = random_module(tiny_config(), "adapter", seed=6, bottleneck=8)
    law = run_dir / "adapters" / "law"
    law.mkdir()
    save_file(params, str(law / "module.safetensors"))
    (law / "result.json").write_text(json.dumps(
        medical | {"domain": "law", "config": config, "lr": 0.003}))

    publish_builtin(tmp_path / "data", run_dir, builtin, snapshot=tmp_path / "snapshot")

    card = (builtin / "MODEL_CARD.md").read_text()
    small = sum(t.numel() for t in random_module(
        tiny_config(), "adapter", seed=6, bottleneck=4)[1].values())
    large = sum(t.numel() for t in params.values())
    assert small < large
    assert f"{small / 1e3:,.0f}k to {large / 1e3:,.0f}k parameters" in card
    assert "| law | 3 | 8 | 0.003 | 1.0 | 1.0 |" in card
    assert "| medical | 3 | 4 | 0.001 | 1.0 | 1.0 |" in card
