"""The GPU run of issue #47, on the CPU: the packer, the device batches, the whole run end
to end with a tiny shape under a 30-second budget, and what it brings back."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import torch

from model_store import Store
from server.engine.artifacts import build_engine
from server.engine.backbone import Backbone
from server.quality.estimator import Estimator
from tests.tiny import ENGLISH, FRENCH, spm_bytes
from tests.trainer.builtin_directions import FR_EN_NAME, build_both
from tests.trainer.test_default_recipe import published_builtin, write_router
from trainer.gpu import run as gpu_run
from trainer.gpu.adapters import ADAPTER, AdapterSettings
from trainer.gpu.batches import DeviceBatches, Specials
from trainer.gpu.pack import carrying_checkout, pack
from trainer.gpu.packed import read_pack
from trainer.gpu.restore import restore
from trainer.gpu.shards import SHARD_LIMIT, read_shards, shard_plan, write_shards
from trainer.quality.fit import refit_builtin
from trainer.recipes import default_en_fr as recipe
from trainer.recipes.default_stages import BACKBONE_NAME, ROUTER_NAME
from trainer.recipes.directions import EN_FR
from trainer.recipes.publication import publish_builtin, publish_router
from trainer.recipes.snapshot import SNAPSHOT_DIR

EXTRAS = ("news", "software-ui")
REPO = Path(__file__).resolve().parents[2]


def write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def tiny_data(root: Path) -> Path:
    """The recipe's layout: 7 domains (train, dev) and two extra genres, tiny sentences."""
    pairs = list(zip(ENGLISH, FRENCH, strict=True))
    for number, domain in enumerate(recipe.DOMAINS):
        chosen = pairs[number:] + pairs[:number]
        folder = root / "en-fr" / "domains" / domain
        for split, rows in (("train", chosen * 2), ("dev", chosen[:4])):
            write_lines(folder / f"{split}.en", [s for s, _ in rows])
            write_lines(folder / f"{split}.fr", [t for _, t in rows])
    for genre in EXTRAS:
        write_lines(root / "en-fr" / "extra" / genre / "train.en", ENGLISH * 3)
        write_lines(root / "en-fr" / "extra" / genre / "train.fr", FRENCH * 3)
    return root


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pack")
    spm_path = root / "spm.model"
    spm_path.write_bytes(spm_bytes())
    out = root / "pack"
    pack(tiny_data(root / "data"), out, direction="en-fr", spm_path=spm_path,
         temperature=2.0, preset=1)
    return out


@pytest.fixture(scope="module")
def tiny_run(packed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole run on the CPU: tiny shape, 30-second budget."""
    out = tmp_path_factory.mktemp("run") / "out"
    assert gpu_run.main(["--pack", str(packed), "--out", str(out), "--tiny", "--minutes", "0.5",
                         "--device", "cpu", "--max-tokens", "400"]) == 0
    return out


def test_the_pack_holds_every_corpus_in_the_recipes_order(packed: Path, tmp_path: Path) -> None:
    loaded = read_pack(packed)
    info = loaded.info
    assert info.names == (*recipe.DOMAINS, *EXTRAS)
    assert info.domains == recipe.DOMAINS
    assert info.pairs == (26,) * 7 + (39, 39)
    assert info.temperature == 2.0 and info.max_len == recipe.MAX_LEN
    assert len(loaded.train) == sum(info.pairs) and info.dev_pairs == (4,) * 7
    assert loaded.dev.corpus is not None and list(np.bincount(loaded.dev.corpus)) == [4] * 7
    # the first medical pair is ENGLISH[0] -> FRENCH[0], without specials
    processor = spm.SentencePieceProcessor(model_proto=loaded.spm)
    assert processor.decode(loaded.train.rows("src")[0].tolist()) == ENGLISH[0]
    assert processor.decode(loaded.train.rows("tgt")[0].tolist()) == FRENCH[0]
    reverse = tmp_path / "reverse"
    pack(tiny_data(tmp_path / "data"), reverse, direction="fr-en", spm_path=packed / "spm.model",
         temperature=2.0, preset=1)
    back = read_pack(reverse)
    assert back.info.direction == "fr-en"
    assert [r.tolist() for r in back.train.rows("src")] == \
        [r.tolist() for r in loaded.train.rows("tgt")]


def test_an_epoch_draws_every_pair_once_in_batches_under_the_token_budget(
        packed: Path) -> None:
    loaded = read_pack(packed)
    specials = Specials(pad=0, start=2, eos=3)
    data = DeviceBatches(loaded.train, specials, torch.device("cpu"))
    batches = data.epoch(max_tokens=200, seed=1, epoch=0)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(data)))
    for rows in batches:
        batch = data.gather(rows)
        assert batch.src.shape[0] * (batch.src.shape[1] + batch.tgt_in.shape[1]) <= 2 * 200
        lengths = (batch.src != 0).sum(1)
        assert (batch.src[torch.arange(len(rows)), lengths - 1] == 3).all()  # EOS last
        assert (batch.tgt_in[:, 0] == 2).all()
        words = (batch.tgt_out[:, :-1] != 0) & (batch.tgt_out[:, :-1] != 3)  # no pad, EOS
        assert torch.equal(batch.tgt_in[:, 1:][words], batch.tgt_out[:, :-1][words])
        assert ((batch.tgt_out == 3).sum(1) == 1).all()
    again = data.epoch(max_tokens=200, seed=1, epoch=0)
    assert [r.tolist() for r in again] == [r.tolist() for r in batches]  # replayable
    other = data.epoch(max_tokens=200, seed=1, epoch=1)
    assert [r.tolist() for r in other] != [r.tolist() for r in batches]


def test_shards_stay_under_the_limit_and_read_back(tmp_path: Path) -> None:
    tensors = {f"t{i}": torch.randn(300, 1000) for i in range(5)}  # 600 kB each as float16
    limit = 2 * 2**20
    assert [len(names) for names in shard_plan(tensors, limit)] == [3, 2]
    paths = write_shards(tensors, tmp_path, "w", limit)
    assert all(p.stat().st_size <= limit for p in paths)
    back = read_shards(tmp_path, "w")
    assert all(torch.equal(back[k], tensors[k].half().float()) for k in tensors)
    with pytest.raises(ValueError, match="more than a shard"):
        shard_plan({"big": torch.zeros(2**20)}, limit)


def test_the_adapter_settings_are_the_recipes() -> None:
    settings, theirs = AdapterSettings(), recipe.ADAPTER_SETTINGS
    assert ADAPTER == recipe.ADAPTER
    assert (settings.lr, settings.warmup_steps, settings.max_tokens, settings.max_epochs) == \
        (theirs.lr, theirs.warmup_steps, theirs.max_tokens, theirs.max_epochs)


def test_the_run_needs_no_web_stack() -> None:
    """The device machine's image has torch, numpy, safetensors, sentencepiece; not the
    server's pins."""
    blocked = ("pydantic", "fastapi", "fasttext", "sqlalchemy", "psycopg", "ray", "sacrebleu")
    code = (f"import sys\nfor name in {blocked!r}: sys.modules[name] = None\n"
            "import trainer.gpu.run  # noqa\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_whole_run_ends_within_a_30_second_budget_on_the_cpu(tiny_run: Path) -> None:
    out = tiny_run
    report = json.loads((out / "run.json").read_text())
    backbone = report["backbone"]
    assert report["device"].startswith("CPU") and report["shape"] == "tiny"
    assert backbone["steps"] > 0 and backbone["target_tokens"] > 0
    curve = backbone["curve"]
    assert len(curve) >= 2 and curve[-1]["dev_loss"] < curve[0]["dev_loss"]
    assert backbone["chosen_window"] in (1, 2, 4, 8)
    assert backbone["dev_loss"] == min(backbone["averaging_dev_loss"].values())
    assert set(report["adapters"]) == set(recipe.DOMAINS)
    for summary in report["adapters"].values():
        assert summary["pairs"] == 26 and summary["dev_loss"] <= summary["backbone_dev_loss"]
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted([*report["shards"], "run.json", "run.log"])
    assert all((out / name).stat().st_size <= SHARD_LIMIT for name in files)
    assert "adapter law" in (out / "run.log").read_text()
    # the backbone shards are the averaged model, float16
    weights = read_shards(out, "backbone")
    model = Backbone(gpu_run.TINY.__class__.from_dict(report["config"]))
    model.load_state_dict(weights)
    adapters = read_shards(out, "adapters")
    assert {name.split("/")[0] for name in adapters} == set(recipe.DOMAINS)


def test_restore_publishes_the_run_as_the_next_built_in_version_keeping_the_router(
        tiny_run: Path, packed: Path, tmp_path: Path) -> None:
    builtin = tmp_path / "builtin"
    published_builtin(builtin)
    router_run = tmp_path / "router-run"
    write_router(router_run, temperature=2.0)
    publish_router(router_run, builtin)
    router_bytes = (router_run / "classifier" / "classifier.bin").read_bytes()
    data = tiny_data(tmp_path / "data")
    run_dir = tmp_path / "run"
    report = restore(tiny_run, packed, data, run_dir, builtin=builtin)
    assert report["storage"] in ("int8-rows", "float16")
    check = report["storage_check"]
    assert (report["storage"] == "int8-rows") == (
        check["float32_dev_bleu"] - check["int8_rows_dev_bleu"] <= 0.1)
    results = {p.parent.name: json.loads(p.read_text())
               for p in (run_dir / "adapters").glob("*/result.json")}
    assert set(results) == set(recipe.DOMAINS)
    assert all(r["pairs"] == 26 and "bleu" in r["dev"] for r in results.values())
    publish_builtin(data, run_dir, builtin, snapshot=tmp_path / "snapshot")
    with Store.open(tmp_path / "serving", builtin_dir=builtin) as store:
        backbone = store.load_backbone(BACKBONE_NAME)
        assert backbone.manifest.version == 2
        assert backbone.manifest.provenance["steps"] == report["backbone"]["steps"]
        router = store.load("classifier", ROUTER_NAME)
        assert router.files["classifier.bin"] == router_bytes  # the same router, republished
        assert router.manifest.backbone_fingerprint == backbone.manifest.backbone_fingerprint
        assert router.manifest.config["temperature"] == 2.0
        assert store.active_domains() == {d: 1 for d in recipe.DOMAINS}
        engine = build_engine(backbone.files)
    assert engine.config.d_model == gpu_run.TINY.d_model
    assert len(engine.translate_texts([ENGLISH[0]])) == 1
    card = (builtin / "MODEL_CARD.md").read_text()
    assert f"minutes on one {report['device']}" in card
    assert f"{report['backbone']['target_tokens'] / 1e6:.1f}M target tokens seen" in card


def test_restore_publishes_en_fr_beside_fr_en_which_stays_bit_identical(
        tiny_run: Path, packed: Path, tmp_path: Path) -> None:
    """The shipped store holds both directions: publishing the GPU run's en->fr keeps it the
    default direction (the oldest backbone), puts its modules and router in en->fr's flat
    layout, refits its quality estimator, and leaves every fr->en file as it was."""
    builtin = build_both(tmp_path)
    router_run = tmp_path / "router-run"
    write_router(router_run, temperature=2.0)  # en->fr's router, with the scores it ships
    publish_router(router_run, builtin)
    (builtin / "MODEL_CARD-fr-en.md").write_text("fr->en's card\n")
    data = tiny_data(tmp_path / "data")
    refit_builtin(builtin, data, backbone=FR_EN_NAME, source="fr", target="en")
    fr_en = {p.relative_to(builtin).as_posix(): p.read_bytes() for p in builtin.rglob("*")
             if p.is_file() and (FR_EN_NAME in p.as_posix() or p.name.endswith("-fr-en.md"))}
    assert any(name.startswith("directions/") for name in fr_en)
    assert f"quality/{FR_EN_NAME}.json.xz" in fr_en
    run_dir = tmp_path / "run"
    restore(tiny_run, packed, data, run_dir, builtin=builtin)
    # what `python -m trainer.gpu.restore --publish` runs
    recipe.publish(data, run_dir, builtin, EN_FR, snapshot=SNAPSHOT_DIR)

    after = {p.relative_to(builtin).as_posix(): p.read_bytes() for p in builtin.rglob("*")
             if p.is_file()}
    assert {k: v for k, v in after.items() if k in fr_en} == fr_en  # fr->en untouched
    assert {k for k in after if FR_EN_NAME in k or k.endswith("-fr-en.md")} == set(fr_en)
    shipped = sorted(k.rsplit("/", 1)[0] for k in after if k.endswith("/manifest.json"))
    assert [k for k in shipped if FR_EN_NAME not in k] == sorted(
        [f"backbones/{BACKBONE_NAME}/v2", f"classifiers/{ROUTER_NAME}/v3",
         "modules/medical/v2", *(f"modules/{d}/v1" for d in recipe.DOMAINS if d != "medical")])
    with Store.open(tmp_path / "serving", builtin_dir=builtin) as store:
        assert store.registry.default_backbone() == BACKBONE_NAME
        assert store.active_backbones() == {BACKBONE_NAME: 2, FR_EN_NAME: 1}
        backbone = store.load_backbone(BACKBONE_NAME).manifest
        assert backbone.config["d_model"] == gpu_run.TINY.d_model
        assert set(store.active_domains()) == set(recipe.DOMAINS)
        assert store.active_domains(FR_EN_NAME) == {"medical": 1}
        for domain in recipe.DOMAINS:
            module = store.load("module", domain, backbone=BACKBONE_NAME).manifest
            assert module.backbone_fingerprint == backbone.backbone_fingerprint
        router = store.load("classifier", ROUTER_NAME, backbone=BACKBONE_NAME).manifest
        assert router.backbone_fingerprint == backbone.backbone_fingerprint
        assert router.config["temperature"] == 2.0
        estimator = Estimator.from_json(after[f"quality/{BACKBONE_NAME}.json.xz"])
        assert estimator.backbone_fingerprint == backbone.backbone_fingerprint
        fr_en_backbone = store.load_backbone(FR_EN_NAME).manifest
        assert store.load("classifier", ROUTER_NAME, backbone=FR_EN_NAME).manifest \
            .backbone_fingerprint == fr_en_backbone.backbone_fingerprint


def test_the_fit_check_measures_the_checkout_that_holds_the_pack(tmp_path: Path) -> None:
    """The device call sends the session's checkout with the pack: the check measures the
    checkout the pack is written into, and refuses a pack outside any checkout."""
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    assert carrying_checkout(REPO / ".gpu-not-written") == REPO
    with pytest.raises(ValueError, match="not inside a git checkout"):
        carrying_checkout(tmp_path / "nowhere" / ".gpu")
