"""The quality estimator fitted from scratch for a published backbone and its modules
(trainer/quality/fit.py, the default recipe's publish stage): a real tiny built-in
directory, real decoding of dev files written here, the file read back as the server
reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_store import Store
from server.quality.estimator import Estimator
from server.quality.estimators import EstimatorBook, estimator_path
from tests.tiny import ENGLISH, FRENCH
from tests.trainer.sidecar_store import BACKBONE, build_store
from trainer.quality.fit import dev_sets, refit_builtin, spearman


def write_pairs(folder: Path, split: str, pairs: list[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.en").write_text("".join(f"{s}\n" for s, _ in pairs))
    (folder / f"{split}.fr").write_text("".join(f"{t}\n" for _, t in pairs))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """Dev sets of two of the store's domains (none for `it`) and a train split of one
    genre (its last lines are its dev slice)."""
    pairs = list(zip(ENGLISH, FRENCH, strict=True))
    root = tmp_path / "data"
    write_pairs(root / "en-fr" / "domains" / "medical", "dev", pairs[:5])
    write_pairs(root / "en-fr" / "domains" / "law", "dev", pairs[2:8])
    write_pairs(root / "en-fr" / "extra" / "news", "train", pairs * 3)
    return root


def test_dev_sets_are_the_domains_dev_files_and_the_genres_last_train_lines(
        data_dir: Path) -> None:
    sets = dev_sets(data_dir, {"medical": "m@1", "law": None, "it": "i@1"}, lines=4,
                    genre_lines=3)
    assert [(s.name, s.module_id, len(s.pairs)) for s in sets] == [
        ("law", None, 4), ("medical", "m@1", 4), ("news", None, 3)]
    assert sets[2].pairs == list(zip(ENGLISH, FRENCH, strict=True))[-3:]


def test_another_pairs_dev_sets_are_read_from_its_own_folder(data_dir: Path) -> None:
    """en->de's sets come from `<data>/en-de/` (German as `.de`), not from en-fr's."""
    pairs = [(f"{en} ({i})", f"de {i}") for i, en in enumerate(ENGLISH)]
    folder = data_dir / "en-de" / "domains" / "law"
    folder.mkdir(parents=True)
    for side, index in (("en", 0), ("de", 1)):
        (folder / f"dev.{side}").write_text("".join(f"{p[index]}\n" for p in pairs[:3]))
    sets = dev_sets(data_dir, {"medical": "m@1", "law": "l@1"}, source="en", target="de",
                    pair="en-de")
    assert [(s.name, s.module_id, s.pairs) for s in sets] == [("law", "l@1", pairs[:3])]


def test_the_publish_stage_fits_the_published_backbones_estimator(tmp_path: Path,
                                                                  data_dir: Path) -> None:
    builtin = build_store(tmp_path / "builtin", router=False)
    path = refit_builtin(builtin, data_dir, genre_lines=6)
    assert path == estimator_path(builtin / "quality", BACKBONE)
    estimator = Estimator.from_json(path.read_bytes())
    assert estimator.fitted_on["sets"] == {"medical": 5, "law": 6, "news": 6}
    with Store.open(tmp_path / "served", builtin_dir=builtin) as store:
        manifest = store.load_backbone(BACKBONE).manifest
    assert estimator.backbone_fingerprint == manifest.backbone_fingerprint
    assert EstimatorBook([builtin / "quality"]).get(manifest) == estimator
    assert [p.name for p in (builtin / "quality").iterdir()] == [f"{BACKBONE}.json.xz"]
    assert path.stat().st_mode & 0o777 == 0o644  # readable by a server of another user


def test_spearman_ranks_with_ties() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2, 3], [5, 6, 7, 8]) == pytest.approx(0.9487, abs=1e-4)
    assert spearman([0, 0, 0], [1, 2, 3]) == 0.0  # a constant ranks nothing
