"""Quality per direction: each served backbone's sentences are scored by the estimator
fitted for that backbone (`NMT_STORE_DIR/quality/<backbone>.json.xz`, matched by fingerprint),
and a backbone without one by the documented prior."""

from __future__ import annotations

from pathlib import Path

from conftest import make_client

from server.quality.estimator import Estimator
from server.quality.estimators import QUALITY_DIR, write_estimator
from tests.two_directions import EN_FR, ENGLISH, FR_EN, FRENCH, build_two_directions, translate

# a constant estimator (every weight 0): its score cannot come from the prior by chance
CONSTANT = 0.777


def test_each_direction_uses_its_own_backbones_estimator(tmp_path: Path) -> None:
    root = build_two_directions(tmp_path / "store")
    text = f"{FRENCH} {FRENCH}"

    with make_client(root, backbone=EN_FR) as client:
        served = client.app.state.directions.by_name(FR_EN)  # type: ignore[attr-defined]
        write_estimator(root / QUALITY_DIR, FR_EN, Estimator(
            features=("lp_mean",), mean=(0.0,), scale=(1.0,), weights=(0.0,), bias=CONSTANT,
            threshold=0.5, backbone_fingerprint=served.runtime.backbone.backbone_fingerprint))
        french = translate(client, text=text, source="fr", target="en")
        english = translate(client, text=f"{ENGLISH} {ENGLISH}")
        explicit = translate(client, text=f"{ENGLISH} {ENGLISH}", source="en", target="fr")

    assert [s["quality"] for s in french["sentences"]] == [CONSTANT, CONSTANT]
    assert french["quality"] == CONSTANT
    # en->fr has no estimator of its own: the prior (1 + 0.4 x mean token log-probability)
    scores = [s["quality"] for s in english["sentences"]]
    assert len(scores) == 2 and all(0.0 <= q <= 1.0 and q != CONSTANT for q in scores)
    assert explicit["sentences"] == english["sentences"]
