"""Joint training of a word-level mixture on a tiny separable toy: the loss falls, the
proportions learn the labels, runs resume, and the recipe publishes into a store."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from contract.training import JobConfigError, normalise_config
from model_store import Store
from server.engine.artifacts import backbone_parts, module_params
from server.engine.backbone import Backbone
from server.engine.families.mixing import WordMixing
from server.engine.tokenizer import Tokenizer
from tests.tiny import random_backbone, spm_bytes, tiny_backbone_files, tiny_config
from trainer.recipes.mixing_en_fr import Recipe, run
from trainer.training.data import encode_for_backbone, join_labelled
from trainer.training.loop import TrainingInterrupted, TrainSettings
from trainer.training.mixing import domain_loss, train_mixing

WORDS = {
    "medical": ["patient", "tablet", "medicine", "dose", "children"],
    "law": ["council", "regulation", "member", "states", "directive", "decision"],
    "it": ["click", "button", "window", "file", "files", "list"],
}
DOMAINS = list(WORDS)
FAST = TrainSettings(lr=0.01, warmup_steps=5, max_tokens=400, max_epochs=100, max_steps=60,
                     max_minutes=5.0, eval_every=20, log_every=1, bf16=False,
                     checkpoint_every_s=1e9, patience=0)


def toy_pairs(domain: str, count: int, seed: int) -> list[tuple[str, str]]:
    """Sentences of one domain's words; the 'translation' copies them."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = " ".join(rng.choice(WORDS[domain]) for _ in range(rng.randint(3, 6)))
        out.append((words, words))
    return out


def tokenizer() -> Tokenizer:
    return Tokenizer(spm_bytes(), vocab=None, eos_id=3, unk_id=1, pad_id=0)


def toy_backbone() -> Backbone:
    return random_backbone(tiny_config(), seed=0, std=0.2).requires_grad_(False)


def config() -> dict[str, object]:
    return {"family": "mixing", "domains": DOMAINS, "sides": "both"}


def toy_data(count: int = 24) -> tuple[object, dict[str, list[tuple[str, str]]]]:
    tok = tokenizer()
    parts = [encode_for_backbone(toy_pairs(d, count, seed=i), tok, tok, tiny_config(),
                                 max_len=32, label=i)
             for i, d in enumerate(DOMAINS)]
    dev = {d: toy_pairs(d, 8, seed=100 + i) for i, d in enumerate(DOMAINS)}
    return join_labelled(parts), dev


def test_domain_loss_masks_padding_and_is_log_k_at_start() -> None:
    from server.engine.mixture import SiteProportions

    uniform = torch.full((2, 4, 3), 1 / 3)
    sharp = torch.tensor([0.9, 0.05, 0.05]).expand(2, 4, 3).clone()
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    labels = torch.tensor([0, 0])
    sites = [SiteProportions("encoder", 0, "ffn.fc1", uniform)]
    assert float(domain_loss(sites, labels, source_mask=mask, target_mask=mask)) == \
        pytest.approx(torch.log(torch.tensor(3.0)).item())
    garbage = sharp.clone()
    garbage[0, 2:] = torch.tensor([1e-6, 0.5, 0.5])  # padding positions: must not count
    sites = [SiteProportions("decoder", 1, "cross_attn.k", garbage)]  # on source positions
    target_mask = torch.zeros(2, 4, dtype=torch.bool)
    assert float(domain_loss(sites, labels, source_mask=mask, target_mask=target_mask)) == \
        pytest.approx(-torch.log(torch.tensor(0.9)).item(), abs=1e-6)


def test_joint_training_learns_the_domains(tmp_path: Path) -> None:
    torch.manual_seed(0)
    data, dev = toy_data()
    losses: list[float] = []
    tok = tokenizer()
    result = train_mixing(toy_backbone(), config(), data, dev, source=tok, target=tok,
                          settings=FAST, run_dir=tmp_path / "run", max_len=32, bleu=True,
                          on_progress=lambda p: losses.append(p.loss))
    assert result.progress.finished and result.progress.step == 60
    assert sum(losses[-5:]) / 5 < 0.85 * sum(losses[:5]) / 5
    accuracies = [m.accuracy for m in result.dev.values()]
    # Token-level, chance is 1/3; pieces shared by the domains (EOS, suffixes) cap it.
    assert min(accuracies) > 0.6 and sum(accuracies) / len(accuracies) > 0.8
    assert set(result.bleu) == set(DOMAINS)
    assert torch.equal(result.params["epsilon"], torch.tensor([0.1]))  # never trained
    assert (tmp_path / "run" / "best.safetensors").exists()


def test_only_the_module_trains_and_labels_are_required(tmp_path: Path) -> None:
    backbone = toy_backbone()
    before = {k: v.clone() for k, v in backbone.state_dict().items()}
    data, dev = toy_data(8)
    tok = tokenizer()
    settings = TrainSettings(**{**FAST.__dict__, "max_steps": 3, "eval_every": 3})
    train_mixing(backbone, config(), data, dev, source=tok, target=tok, settings=settings,
                 run_dir=tmp_path / "run", max_len=32, bleu=False)
    after = backbone.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    unlabelled = type(data)(data.source, data.target)
    with pytest.raises(ValueError, match="no domain labels"):
        train_mixing(backbone, config(), unlabelled, dev, source=tok, target=tok,
                     settings=settings, run_dir=tmp_path / "other", bleu=False)
    with pytest.raises(ValueError, match="must be those of the domains"):
        train_mixing(backbone, config(), data, dict(reversed(dev.items())), source=tok,
                     target=tok, settings=settings, run_dir=tmp_path / "other", bleu=False)


def test_interrupted_training_resumes(tmp_path: Path) -> None:
    data, dev = toy_data(8)
    tok = tokenizer()
    settings = TrainSettings(**{**FAST.__dict__, "max_steps": 6, "eval_every": 3})
    calls = {"n": 0}

    def stop_after_two() -> bool:
        calls["n"] += 1
        return calls["n"] == 2

    with pytest.raises(TrainingInterrupted) as caught:
        train_mixing(toy_backbone(), config(), data, dev, source=tok, target=tok,
                     settings=settings, run_dir=tmp_path / "run", bleu=False,
                     should_stop=stop_after_two)
    assert caught.value.progress.step == 2
    steps: list[int] = []
    result = train_mixing(toy_backbone(), config(), data, dev, source=tok, target=tok,
                          settings=settings, run_dir=tmp_path / "run", bleu=False,
                          on_progress=lambda p: steps.append(p.step))
    assert result.progress.step == 6 and steps == [3, 4, 5, 6]  # went on from step 2


def test_add_one_domain_jobs_refuse_the_joint_family() -> None:
    with pytest.raises(JobConfigError, match="trained jointly"):
        normalise_config({"family": "mixing", "domains": DOMAINS}, tiny_config())


def write_corpus(root: Path) -> Path:
    for index, domain in enumerate(DOMAINS):
        base = root / "en-fr" / "domains" / domain
        base.mkdir(parents=True)
        for split, count, seed in (("train", 24, index), ("dev", 6, 50 + index)):
            pairs = toy_pairs(domain, count, seed)
            (base / f"{split}.en").write_text("".join(s + "\n" for s, _ in pairs))
            (base / f"{split}.fr").write_text("".join(t + "\n" for _, t in pairs))
    return root


@pytest.mark.parametrize("rank", [None, 2])
def test_recipe_publishes_the_mixture(tmp_path: Path, rank: int | None) -> None:
    store_root = tmp_path / "store"
    with Store.open(store_root, builtin_dir=None) as store:
        files = tiny_backbone_files()
        manifest = store.publish("backbone", "tiny", files,
                                 config=json.loads(files["config.json"]))
        store.activate("backbone", "tiny", manifest.version)
    settings = TrainSettings(**{**FAST.__dict__, "max_steps": 4, "eval_every": 2})
    recipe = Recipe(write_corpus(tmp_path / "data"), tmp_path / "run", store_root, 1.0,
                    tuple(DOMAINS), backbone="tiny", rank=rank, activate=True, bleu=False,
                    builtin=False, settings=settings)
    summary = run(recipe)
    assert summary["version"] == 1 and summary["active"] and summary["steps"] == 4
    assert set(summary["dev"]) == set(DOMAINS)
    with Store.open(store_root, builtin_dir=None) as store:
        assert store.active_domains() == {"mixed": 1}
        loaded = store.load("module", "mixed")
        assert loaded.manifest.config["family"] == "mixing"
        assert loaded.manifest.config["domains"] == DOMAINS
        assert loaded.manifest.config["rank"] == rank
        params = module_params(loaded.files)
        parts = backbone_parts(store.load_backbone("tiny").files)
    assert set(params) == set(WordMixing().shapes(parts.config, loaded.manifest.config))
    assert run(recipe) == json.loads((tmp_path / "run" / "published.json").read_text())
