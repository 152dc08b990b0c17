"""The built-in directory with both default directions (issue #43), served: a server over
a store that layers it serves en->fr and fr->en, French text with `source: auto` goes to
fr->en, and a request that names no language stays with en->fr, the default. And the
package's own built-in directory (what `make run` serves): every backbone it ships is
registered and served, with exactly the modules shipped for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import make_client
from fastapi.testclient import TestClient

from model_store import BUILTIN_DIR, Store
from server.serving.directions import served_backbones
from tests.trainer.builtin_directions import FR_EN_NAME, build_both
from trainer.recipes.default_stages import BACKBONE_NAME

FRENCH = "Le patient prend un comprimé chaque jour avec un grand verre d'eau."
ENGLISH = "The patient takes one tablet every day with a glass of water."


@pytest.fixture(scope="module")
def builtin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_both(tmp_path_factory.mktemp("builtin-directions"))


def client_of(store: Path, builtin: Path, **overrides: Any) -> TestClient:
    return make_client(store, builtin_artifacts=True, builtin_dir=builtin,
                       backbone=overrides.pop("backbone", None), **overrides)


def translate(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_both_built_in_directions_are_served_and_french_goes_to_fr_en(
        builtin: Path, tmp_path: Path) -> None:
    with client_of(tmp_path / "fr-en-alone", builtin, backbone=FR_EN_NAME,
                   all_backbones=False) as alone:
        fr_en = translate(alone, text=FRENCH, domain="medical")["translation"]
        fr_en_auto = translate(alone, text=FRENCH)["translation"]
    with client_of(tmp_path / "en-fr-alone", builtin, backbone=BACKBONE_NAME,
                   all_backbones=False) as alone:
        en_fr = translate(alone, text=FRENCH, domain="medical")["translation"]

    with client_of(tmp_path / "store", builtin) as both:
        listed = both.get("/languages").json()["directions"]
        auto = translate(both, text=FRENCH, source="auto", domain="medical")
        auto_to_english = translate(both, text=FRENCH, source="auto", target="en")
        into_english = translate(both, text=FRENCH, target="en", domain="medical")
        unnamed = translate(both, text=FRENCH, domain="medical")
        english = translate(both, text=ENGLISH, source="auto", target="fr")

    assert [(d["source"], d["target"], d["backbone"], d["default"], d["domains"])
            for d in listed] == [("en", "fr", BACKBONE_NAME, True, ["medical"]),
                                 ("fr", "en", FR_EN_NAME, False, ["medical"])]
    assert auto["detected"]["language"] == "fr"
    assert auto["translation"] == into_english["translation"] == fr_en
    assert auto_to_english["translation"] == fr_en_auto  # routed by fr->en's own router
    assert unnamed["translation"] == en_fr  # no language named: the default, as before
    assert english["detected"]["language"] == "en"
    assert fr_en != en_fr  # two backbones, two answers


def shipped_modules(builtin: Path) -> dict[str, dict[str, int]]:
    """Backbone -> {domain: newest version} as the package ships them: the flat layout's
    modules belong to the first backbone, `directions/<backbone>/`'s to that one."""
    def newest(modules: Path) -> dict[str, int]:
        return {d.name: max(int(v.name[1:]) for v in d.glob("v*")) for d in modules.iterdir()
                if d.is_dir()} if modules.is_dir() else {}
    found = {BACKBONE_NAME: newest(builtin / "modules")}
    directions = builtin / "directions"
    for folder in sorted(directions.iterdir()) if directions.is_dir() else []:
        found[folder.name] = newest(folder / "modules")
    return found


def test_make_run_serves_every_backbone_the_package_ships(tmp_path: Path) -> None:
    shipped = sorted(p.name for p in (BUILTIN_DIR / "backbones").iterdir())
    assert BACKBONE_NAME in shipped
    with Store.open(tmp_path / "store", builtin_dir=BUILTIN_DIR) as store:
        assert sorted(store.active_backbones()) == shipped
        modules = shipped_modules(BUILTIN_DIR)
        assert sorted(modules) == shipped  # every direction's modules have a backbone
        for backbone, domains in modules.items():
            assert store.active_domains(backbone) == domains, backbone
        # the default backbone is the one with the oldest manifest: an en-fr backbone
        # republished after fr-en's would make fr->en the default of every new store
        assert store.registry.default_backbone() == BACKBONE_NAME, \
            "en->fr must stay the default direction: republish default-fr-en after it"
        served = served_backbones(store, None, every=True)
    # en->fr stays the default direction (None: a store's only backbone)
    assert served[0] in (None, BACKBONE_NAME) and len(served) == len(shipped)
