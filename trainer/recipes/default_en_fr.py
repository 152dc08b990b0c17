"""Recipe of the embedded default model: an English->French backbone trained from scratch
on every en-fr corpus of the shared data (7 domains + extra genres), joint sentencepiece;
`--direction fr-en` trains the French->English backbone from the same pairs reversed.

    python -m trainer.recipes.default_en_fr --data ../shared/data --run-dir runs/default-en-fr
    python -m trainer.recipes.default_en_fr --direction fr-en  # reversed: every stage

Every stage is resumable: re-running the command continues where it stopped. On a machine
without the backbone's checkpoint, `--stage restore` rebuilds the run dir from the
published built-in backbone (or from the committed snapshot of a backbone stage that
spans sessions, when it is further along: `--stage snapshot` writes it); the later stages
(adapters, classifier, publish) then run as usual, and the backbone stage warm-starts from
it when given a larger --max-minutes. Another direction publishes beside en-fr
(direction_publication.py; the commands: docs/DIRECTIONS.md, "Training fr->en").
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
from pathlib import Path

import torch

from contract.artifacts import BACKBONE_CONFIG_FILE
from contract.backbone import BackboneConfig
from server.engine.backbone import Backbone
from trainer.quality.fit import refit_builtin
from trainer.recipes.default_stages import (
    BACKBONE_NAME,
    backbone_progress,
    backbone_progress_path,
    restore_adapters,
    restore_from_snapshot,
    restore_run_dir,
    train_adapter,
)
from trainer.recipes.direction_publication import publish_direction, publish_direction_router
from trainer.recipes.directions import DIRECTIONS, EN_FR, Direction
from trainer.recipes.publication import publish_builtin, publish_router
from trainer.recipes.router_stage import train_router
from trainer.recipes.snapshot import save_snapshot
from trainer.recipes.snapshot import snapshot_dir as snapshot_dir
from trainer.recipes.snapshot_history import fetch

# stage 1 (training_set.py), imported from here by the other recipes and benchmarks
from trainer.recipes.training_set import DOMAINS as DOMAINS
from trainer.recipes.training_set import MAX_LEN as MAX_LEN
from trainer.recipes.training_set import VOCAB_SIZE
from trainer.recipes.training_set import corpora as corpora
from trainer.recipes.training_set import prepare as prepare
from trainer.recipes.warm_start import warm_start
from trainer.training.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    EncodedPairs,
    encode_pairs,
    iterate_batches,
    token_batches,
)
from trainer.training.loop import (
    ShouldStop,
    Trainable,
    TrainingInterrupted,
    TrainSettings,
    bf16_autocast,
    stop_on_signals,
    translation_loss,
)
from trainer.training.run import train

log = logging.getLogger("trainer.recipes.default_en_fr")
BUILTIN_DIR = Path(__file__).resolve().parents[2] / "model_store" / "builtin"


# Pre-norm: with this recipe's small batches (~2k target tokens), lr 1e-3 and short warm-up,
# post-norm learned the target language long before it learned to use the source (the
# post-norm v2, shipped before: 0.4-0.9 nats of source reliance after 6 h). From scratch
# on the captions genre, 8 minutes each: pre-norm 17.6 BLEU and 1.54 nats of reliance vs
# post-norm 3.1 and 0.40 (Xiong et al. 2020 on why pre-norm trains faster).
BACKBONE = BackboneConfig(
    src_vocab_size=VOCAB_SIZE, tgt_vocab_size=VOCAB_SIZE, d_model=256, n_heads=4, d_ff=1024,
    encoder_layers=6, decoder_layers=3, activation="relu", normalize_before=True,
    positions="sinusoidal", max_positions=512, scale_embedding=True, shared_embeddings="all",
    output_bias=False, dropout=0.1, pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID,
    decoder_start_id=BOS_ID)

ADAPTER = {"family": "adapter", "bottleneck": 128}
ADAPTER_SETTINGS = TrainSettings(lr=1e-3, warmup_steps=100, max_tokens=5000, max_epochs=20,
                                 max_minutes=5.0, eval_every=50, patience=6, log_every=25,
                                 checkpoint_every_s=120.0)
STAGES = ("backbone", "adapters", "classifier", "publish")
# not part of "all"; publish-router publishes a direction's classifier alone (backbone,
# modules and model card untouched); quality refits the built-in quality estimator alone
# (publish does it too)
EXTRA_STAGES = ("restore", "snapshot", "publish-router", "quality")

# The budgets are the shipped default's (backbone v3: 112 min, 0.65 passes; adapters 5 min).
SETTINGS = TrainSettings(lr=1e-3, warmup_steps=800, max_tokens=5000, max_epochs=8,
                         max_minutes=112.0, eval_every=500, checkpoint_every_s=300.0,
                         patience=0)



def cooldown(run_dir: Path, start: int | None, steps: int) -> dict[str, int]:
    """The loop settings of a cooldown (trainer/training/loop.py lr_at) that starts at `start` or,
    by default, at the step of the run's checkpoint."""
    if steps <= 0:
        return {}
    if start is None:
        progress = backbone_progress_path(run_dir)
        if not progress.exists():
            raise SystemExit(f"--cooldown-steps without --cooldown-from needs a checkpoint "
                             f"to start from; {progress} does not exist")
        start = int(backbone_progress(run_dir)["step"])
        log.info("cooldown from step %d (the checkpoint's) over %d steps: resume with "
                 "--cooldown-from %d", start, steps, start)
    return {"cooldown_from": start, "cooldown_steps": steps, "max_steps": start + steps}


def dev_loss_fn(model: Backbone, dev: EncodedPairs) -> float:
    batches = token_batches(dev, max_tokens=8000, seed=0, epoch=0)
    total, tokens = 0.0, 0
    with torch.no_grad(), bf16_autocast(True):
        for _, batch in iterate_batches(dev, batches):
            logits = model(batch.src, batch.tgt_in)
            count = batch.target_tokens
            total += float(translation_loss(logits, batch, 0.0)) * count
            tokens += count
    return total / max(tokens, 1)


def backbone_trainable(model: Backbone) -> Trainable:
    return Trainable(
        parameters=list(model.parameters()),
        forward=lambda batch: model(batch.src, batch.tgt_in),
        state_dict=model.state_dict,
        load_state_dict=lambda state: model.load_state_dict(state),
        set_train=model.train)


def check_architecture(run_dir: Path) -> None:
    """A run dir whose backbone has another architecture than the recipe's (restored from
    an older published backbone, or trained by an older recipe) cannot be trained on."""
    saved = run_dir / BACKBONE_CONFIG_FILE
    if not saved.exists():
        return
    config = BackboneConfig.from_dict(json.loads(saved.read_text()))
    if config != BACKBONE:
        saved_values = config.to_dict()
        changed = sorted(k for k, v in BACKBONE.to_dict().items() if saved_values.get(k) != v)
        raise ValueError(f"{run_dir} holds a backbone of another architecture than this "
                         f"recipe's (differs in {', '.join(changed)}): train the recipe's "
                         "backbone from scratch in a new --run-dir")


def train_backbone(data_dir: Path, run_dir: Path, settings: TrainSettings, *,
                   should_stop: ShouldStop | None = None,
                   direction: Direction = EN_FR) -> Backbone:
    """Raises TrainingInterrupted (checkpoint saved) when `should_stop` asks for it."""
    check_architecture(run_dir)
    processor, data = prepare(data_dir, run_dir, direction)
    dev_pairs = [p for c in corpora(data_dir, "dev", direction) for p in c.read()]
    dev = encode_pairs(dev_pairs, processor, max_len=MAX_LEN)
    (run_dir / BACKBONE_CONFIG_FILE).write_text(json.dumps(BACKBONE.to_dict(), indent=1))
    torch.manual_seed(settings.seed)
    model = Backbone(BACKBONE)
    log.info("backbone: %.2fM parameters", sum(p.numel() for p in model.parameters()) / 1e6)
    progress = train(backbone_trainable(model), data, settings, run_dir / "backbone",
                     evaluate=lambda: -dev_loss_fn(model, dev), should_stop=should_stop)
    if not progress.finished:
        raise TrainingInterrupted(progress)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--direction", choices=sorted(DIRECTIONS), default=EN_FR.name,
                        help="which side of the en-fr pairs is the source")
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="default: runs/default-<direction>")
    parser.add_argument("--stage", choices=STAGES + EXTRA_STAGES + ("all",), default="all",
                        help="one stage, or all of them in order (each resumes or skips "
                             "what is already done)")
    parser.add_argument("--max-minutes", type=float, default=SETTINGS.max_minutes,
                        help="wall-clock budget of the backbone stage")
    parser.add_argument("--max-steps", type=int, default=SETTINGS.max_steps,
                        help="step budget of the backbone stage (the first budget spent "
                             "stops it)")
    parser.add_argument("--max-epochs", type=int, default=SETTINGS.max_epochs,
                        help="epoch budget of the backbone stage (a run that spent it goes on "
                             "when given a larger one: en->de's smaller data spends 8 epochs "
                             "in ~13,000 steps)")
    parser.add_argument("--eval-every", type=int, default=SETTINGS.eval_every,
                        help="backbone stage: steps between two dev loss evaluations")
    parser.add_argument("--warm-start", default=None, metavar="BACKBONE",
                        help="backbone stage of a new run dir: start from this built-in "
                             "backbone (e.g. default-en-fr) with its embeddings carried into "
                             "the run's vocabulary, not from random weights "
                             "(trainer/recipes/warm_start.py)")
    parser.add_argument("--temperature", type=_temperature, default=SETTINGS.temperature,
                        help="corpus sampling temperature of the backbone stage: corpus c "
                             "is drawn with probability ~ size_c ** (1/T); 1 = by size")
    parser.add_argument("--cooldown-steps", type=int, default=0,
                        help="backbone stage: from --cooldown-from (default: the step the "
                             "run resumes at) the learning rate falls linearly to 0 over "
                             "this many steps, then training stops")
    parser.add_argument("--cooldown-from", type=int, default=None,
                        help="the step a cooldown starts at; give it again when resuming")
    parser.add_argument("--adapter-minutes", type=float, default=ADAPTER_SETTINGS.max_minutes,
                        help="wall-clock budget of each domain's adapter")
    parser.add_argument("--adapter-steps", type=int, default=ADAPTER_SETTINGS.max_steps,
                        help="step budget of each domain's adapter (the first budget spent "
                             "stops it)")
    parser.add_argument("--adapter-lr", type=float, default=ADAPTER_SETTINGS.lr,
                        help="peak learning rate of each domain's adapter")
    parser.add_argument("--adapter-bottleneck", type=_bottleneck, nargs="*", default=[],
                        metavar="DOMAIN=SIZE", help="a domain's adapter bottleneck, "
                        f"if not {ADAPTER['bottleneck']}")
    parser.add_argument("--domains", nargs="*", default=list(DOMAINS))
    parser.add_argument("--out", type=Path, default=BUILTIN_DIR,
                        help="where the publish stage writes the built-in artifacts")
    parser.add_argument("--snapshot", type=Path, default=None,
                        help="the committed backbone snapshot that `--stage snapshot` writes "
                             "and `--stage restore` reads (trainer/recipes/snapshot.py); "
                             "default: trainer/recipes/snapshot, or snapshot-<direction> for "
                             "a direction other than en-fr")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    direction = DIRECTIONS[args.direction]
    args.run_dir = args.run_dir or Path(f"runs/default-{direction.name}")
    args.snapshot = args.snapshot or snapshot_dir(direction)
    stages: tuple[str, ...] = STAGES if args.stage == "all" else (args.stage,)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    stop = stop_on_signals()
    try:
        run_stages(args, stages, stop, direction)
    except TrainingInterrupted as interrupted:
        log.info("%s; checkpoint saved: the same command resumes it", interrupted)


def _bottleneck(text: str) -> tuple[str, int]:
    domain, _, size = text.partition("=")
    if domain not in DOMAINS or not size.isdigit() or not 8 <= int(size) <= 1024:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not DOMAIN=SIZE with a domain of {', '.join(DOMAINS)} and a "
            "size from 8 to 1024")
    return domain, int(size)


def _temperature(text: str) -> float:
    value = float(text)
    if not 1.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError(f"{value} is not a temperature from 1 to 100")
    return value


def publish(data_dir: Path, run_dir: Path, out: Path, direction: Direction, *,
            snapshot: Path) -> None:
    """The publish stage: the run dir's next built-in versions (en->fr stays the default
    direction), then the quality estimator refitted for them (it belongs to the backbone
    and modules just published)."""
    # adapters retrained on the published backbone go out beside the others, kept as they are
    restore_adapters(run_dir, out, backbone=direction.backbone_name)
    if direction == EN_FR:
        publish_builtin(data_dir, run_dir, out, snapshot=snapshot)
    else:
        publish_direction(data_dir, run_dir, out, direction, snapshot=snapshot)
    refit_builtin(out, data_dir, backbone=direction.backbone_name, source=direction.source,
                  target=direction.target, pair=direction.pair)


def published(builtin: Path, direction: Direction) -> bool:
    """Whether the built-in directory holds a version of `direction`'s backbone."""
    return any((builtin / "backbones" / direction.backbone_name).glob("v*/manifest.json"))


def share_vocabulary(builtin: Path, run_dir: Path) -> None:
    """The other direction reuses the published en-fr backbone's joint sentencepiece model:
    it was trained on both sides of the same pairs, and one vocabulary for both directions
    spares the backbone stage an hour of sentencepiece training on two cores."""
    spm_path = run_dir / "spm.model"
    published = sorted((builtin / "backbones" / BACKBONE_NAME).glob("v*/source.spm"),
                       key=lambda p: int(p.parent.name[1:]))
    if spm_path.exists() or not published:
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    spm_path.write_bytes(published[-1].read_bytes())
    log.info("joint vocabulary: %s", published[-1])


def run_stages(args: argparse.Namespace, stages: tuple[str, ...],
               stop: threading.Event, direction: Direction = EN_FR) -> None:
    if "restore" in stages:
        fetch(args.snapshot)  # a snapshot carried in the history (snapshot_history.py)
        if direction == EN_FR or published(args.out, direction):
            restore_run_dir(args.run_dir, args.out, snapshot=args.snapshot,
                            backbone=direction.backbone_name)
        else:
            restore_from_snapshot(args.run_dir, args.snapshot)
        # the encoded training set (the model card reads it)
        prepare(args.data, args.run_dir, direction)
    if "backbone" in stages:
        if direction != EN_FR and direction.pair == EN_FR.pair:
            share_vocabulary(args.out, args.run_dir)
        if args.warm_start:
            prepare(args.data, args.run_dir, direction)  # the vocabulary it is carried into
            warm_start(args.run_dir, args.out, backbone=args.warm_start, recipe=BACKBONE)
        settings = TrainSettings(**{**SETTINGS.__dict__, "max_minutes": args.max_minutes,
                                    "max_steps": args.max_steps,
                                    "max_epochs": args.max_epochs,
                                    "eval_every": args.eval_every,
                                    "temperature": args.temperature,
                                    **cooldown(args.run_dir, args.cooldown_from,
                                               args.cooldown_steps)})
        train_backbone(args.data, args.run_dir, settings, should_stop=stop.is_set,
                       direction=direction)
    if "snapshot" in stages:
        save_snapshot(args.run_dir, args.snapshot)
    if "adapters" in stages:
        adapter_settings = TrainSettings(**{
            **ADAPTER_SETTINGS.__dict__, "max_minutes": args.adapter_minutes,
            "max_steps": args.adapter_steps, "lr": args.adapter_lr})
        bottlenecks = dict(args.adapter_bottleneck)
        for domain in args.domains:
            config = ADAPTER | {"bottleneck": bottlenecks.get(domain, ADAPTER["bottleneck"])}
            train_adapter(args.data, args.run_dir, domain, adapter_settings, config=config,
                          should_stop=stop.is_set, direction=direction)
    if "classifier" in stages and direction.router_from is not None:
        log.info("%s builds no router: the server routes it with %s's, which reads the same "
                 "source language", direction.name, direction.router_from)
    elif "classifier" in stages:
        train_router(args.data, args.run_dir, DOMAINS, direction)
    if "publish" in stages:
        publish(args.data, args.run_dir, args.out, direction, snapshot=args.snapshot)
    elif "quality" in stages:
        refit_builtin(args.out, args.data, backbone=direction.backbone_name,
                      source=direction.source, target=direction.target, pair=direction.pair)
    if "publish-router" in stages:
        if direction == EN_FR:
            publish_router(args.run_dir, args.out)
        else:
            publish_direction_router(args.run_dir, args.out, direction)

if __name__ == "__main__":
    main()
