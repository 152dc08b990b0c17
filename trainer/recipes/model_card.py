"""The default model's card, written next to the built-in artifacts by the publish stage."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from contract.artifacts import CLASSIFIER_FEATURES_FILE
from contract.backbone import BackboneConfig
from server.textproc.languages import language_name
from trainer.recipes.directions import DIRECTIONS, EN_FR, Direction
from trainer.recipes.router_stage import ROUTER_SETTINGS

LICENCES = """The 7 domains come from OPUS samples (EMEA and JRC-Acquis: EU documents, reuse with
acknowledgement; KDE4: free-software documentation; TED2020 and QED: CC BY-NC-ND;
OpenSubtitles and Tanzil: research use). The extra genres: WMT newstest (research use),
Tatoeba (CC BY 2.0 FR), Multi30k (research use), WMT biomedical (research use), Europarl
(free reuse), gettext catalogs of Debian/PyPI packages and Firefox/Thunderbird/Godot
(their programs' licences, mostly GPL/LGPL, MPL-2.0), LibreOffice/GIMP/GNOME help (MPL-2.0,
GFDL, CC BY-SA), Debian package descriptions (DDTP), game texts (GPL), World English Bible
and Louis Segond 1910 (public domain), GNU Health/GNUmed terms (ICD-10 terms from the WHO),
finance and lexicon catalogs (their programs' licences). Treat the model as a research
artifact: fine for evaluation and demos; check these licences before commercial use."""

# What the router's artifact holds: no sentence of the corpora above.
ROUTER_FILES = (
    "The router ships no training text. Its artifact holds `classifier.bin`, the fastText "
    "model's parameters (a vector per feature number and per class; its dictionary lists "
    f"numbers, not words), and `{CLASSIFIER_FEATURES_FILE}`, what the training sidecar "
    "retrains the router on when a domain is added or corrections are learnt: per training "
    "sentence, its class and the numbers of its words and word pairs (CRC-32 hashes), "
    "sorted, so the order of the sentence is gone, and only the numbers that at least "
    f"{ROUTER_SETTINGS.min_examples} sentences share, so a name or a phrase of one sentence "
    "is not there (`trainer/routers/features.py`; what the router loses by it: "
    "`benchmarks/results/router-artifacts.md`).")


def _adapter_rows(run_dir: Path) -> list[str]:
    rows = ["| domain | pairs | bottleneck | peak lr | backbone dev BLEU | adapter dev BLEU | "
            "adapter dev chrF | steps | seconds |", "|---|---|---|---|---|---|---|---|---|"]
    for path in sorted((run_dir / "adapters").glob("*/result.json")):
        r: dict[str, Any] = json.loads(path.read_text())
        lr = f"{r.get('lr', 1e-3):g}"  # unrecorded: the recipe's rate before it was an option
        rows.append(f"| {r['domain']} | {r['pairs']} | {r['config']['bottleneck']} | {lr} | "
                    f"{r['backbone_dev']['bleu']:.1f} | {r['dev']['bleu']:.1f} | "
                    f"{r['dev']['chrf']:.1f} | {r['steps']} | {r['train_seconds']:.0f} |")
    return rows


def _sizes(adapters: Sequence[int], backbone: int) -> tuple[str, str]:
    """("598k", "6.0%"), or ranges ("598k to 1,189k", "6.0% to 12.0%") for several sizes."""
    ends = sorted({adapters[0], adapters[-1]}) if adapters else [0]
    return (" to ".join(f"{n / 1e3:,.0f}k" for n in ends),
            " to ".join(f"{100 * n / backbone:.1f}%" for n in ends))


def write_model_card(out: Path, run_dir: Path, *, config: BackboneConfig, parameters: int,
                     adapter_sizes: Sequence[int], progress: dict[str, Any],
                     generic_lines: int,
                     domain_extras: Mapping[str, tuple[str, int]] | None = None,
                     sister_pairs: Mapping[str, Sequence[str]] | None = None,
                     averaged_steps: Sequence[int] = (),
                     gpu_run: Mapping[str, Any] | None = None,
                     direction: Direction = EN_FR) -> Path:
    """`generic_lines`: the router's generic class's training lines; `domain_extras`: extra
    router lines per domain class (domain -> (genre, lines)); `sister_pairs`: language pairs
    whose English domain train splits some classes also learn from (pair -> domains);
    `averaged_steps`: the checkpoints whose mean the published backbone is, if it is one;
    `gpu_run`: the log of the GPU run the backbone and adapters come from
    (trainer/gpu/run.py), if they do; `direction`: the backbone's languages (en-fr's card is
    MODEL_CARD.md, another direction's MODEL_CARD-<direction>.md beside it). Returns its path."""
    source, target = language_name(direction.source), language_name(direction.target)
    counts, shares = _sizes(adapter_sizes, parameters)
    eval_stem = "eval" if direction == EN_FR else f"eval-{direction.name}"
    accuracy_path = run_dir / "classifier" / "accuracy.json"
    accuracy = json.loads(accuracy_path.read_text()) if accuracy_path.exists() else None
    router = (f"dev accuracy {accuracy['dev_accuracy']:.3f}; per domain: " + ", ".join(
        f"{k} {v:.2f}" for k, v in sorted(accuracy["per_domain"].items()))
              if accuracy else "not trained")
    if accuracy and "temperature" in accuracy:
        router += (f"; posteriors calibrated on dev with temperature "
                   f"{accuracy['temperature']:.2f} (dev negative log-likelihood "
                   f"{accuracy['dev_nll']:.3f}, {accuracy['dev_nll_uncalibrated']:.3f} without)")
    extras = "".join(f"; the {domain} class also learns from {count:,} lines of the {genre} "
                     "corpus" for domain, (genre, count) in sorted((domain_extras or {}).items()))
    extras += "".join(f"; the {', '.join(domains)} classes also learn from the {source} side "
                      f"of the {pair} data's train splits of their domains"
                      for pair, domains in (sister_pairs or {}).items())
    averaged = (f" The published weights are the mean of the checkpoints of steps "
                f"{', '.join(map(str, averaged_steps))} (checkpoint averaging, Vaswani et al. "
                "2017)." if averaged_steps else "")
    hours = progress["elapsed_s"] / 3600
    lengths = np.load(run_dir / "train.npz")["tgt_len"]
    epoch_tokens = int(lengths.sum()) + len(lengths)  # + EOS per sentence
    router_line = f"- router: {router}."
    if direction.router_from is not None:  # routed with another direction's router
        lender = DIRECTIONS[direction.router_from]
        router_line = (f"- router: none of its own. The server routes its {source} text with "
                       f"the {language_name(lender.source)}→{language_name(lender.target)} "
                       "direction's router, which reads the same language (routing per "
                       "source language, docs/DIRECTIONS.md; on its dev sentences that router "
                       "picks the right domain as often as one trained for it, "
                       "`benchmarks/results/builtin_size.md`).")
    lines = [
        f"# Model card: {direction.backbone_name}", "",
        f"{_role(direction)}: {'an' if source[0] in 'AEIOU' else 'a'} {source}→{target} "
        f"Transformer backbone {backbone_origin(run_dir)}, one residual adapter per domain, and "
        + ("a fastText router" if direction.router_from is None else
           f"the {language_name(DIRECTIONS[direction.router_from].source)} router of "
           f"{DIRECTIONS[direction.router_from].backbone_name}") + ". Recipe: "
        f"`trainer/recipes/default_en_fr.py` ({_command(direction)}).", "",
        "## Architecture", "",
        f"- backbone: {config.encoder_layers}+{config.decoder_layers} layers, d={config.d_model}, "
        f"{config.n_heads} heads, FFN {config.d_ff}, {config.activation}, "
        f"{'pre-norm' if config.normalize_before else 'post-norm'}, "
        f"sinusoidal positions, joint sentencepiece vocabulary of {config.tgt_vocab_size} "
        f"(unigram, byte fallback), all embeddings shared: {parameters / 1e6:.2f}M parameters "
        f"({_storage(gpu_run)}).",
        f"- domain modules: residual adapters (Bapna & Firat 2019; Pham et al. 2020) after "
        f"every layer, {counts} parameters each ({shares} of the backbone; each domain's "
        "bottleneck is in the adapters table below).",
        *([f"- router: fastText supervised classifier over the {source} source (hashed word "
           f"unigrams and bigrams, those of at least {ROUTER_SETTINGS.min_examples} training "
           "sentences; 10 epochs, product-quantized) with one class per domain and a "
           "`generic` class learned from training genres that no module covers (captions, "
           f"conversation, news: {generic_lines:,} lines drawn across their train splits)"
           + extras + "; a confident prediction of a domain sends the text to its adapter, "
           "anything else to the plain backbone (the server's default routing; "
           f"`benchmarks/results/{eval_stem.replace('eval', 'router')}.md`)."]
          if direction.router_from is None else []), "",
        *(_gpu_budget(gpu_run, progress, epoch_tokens, len(lengths), averaged) if gpu_run
          else _cpu_budget(progress, epoch_tokens, len(lengths), averaged)),
        "- adapters (per domain, backbone frozen; each stops at its step or wall-clock "
        "budget or when dev BLEU stops improving, and keeps its best dev checkpoint):", "",
        *_adapter_rows(run_dir), "",
        router_line, "",
        "Test-set scores of every system (generic, adapters, routing, ensembles) are in "
        f"`benchmarks/results/{eval_stem}.md` (`make eval{_eval_option(direction)}`; "
        f"`QUICK=1` writes a shorter table to `{eval_stem}-quick.md`).", "",
        "## Data and licences", "",
        f"Trained on `shared/data/{direction.pair}`: the 7 labelled domains (medical, law, it, "
        "subtitles, edu, ted, religion; ~5,000 pairs each) and " + EXTRA_GENRES[direction.pair]
        + ("" if direction == EN_FR else f", read {source} side first") + ". Dev and test "
        "splits were never trained on.", "", LICENCES, "",
        *([ROUTER_FILES, ""] if direction.router_from is None else []),
        "## Limitations", "",
        f"A small model trained for {_trained_for(gpu_run, hours)}, far from production "
        "quality (dev BLEU per domain in the adapters table above). The evaluation also measures "
        "how much the backbone uses its input: the "
        "section \"Backbone: reliance on the source\" of "
        f"`benchmarks/results/{eval_stem}.md` compares each reference's likelihood "
        "given its own source and given another sentence's. The model exists so the server "
        "translates out of the box and so the multi-domain machinery can be measured; "
        "import an OPUS-MT model for quality.",
    ]
    out.mkdir(parents=True, exist_ok=True)
    path = out / ("MODEL_CARD.md" if direction == EN_FR else f"MODEL_CARD-{direction.name}.md")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# what each pair of the shared data holds besides its 7 domains
EXTRA_GENRES = {
    "en-fr": ("~530k pairs of extra genres (news, conversation, captions, biomedical, "
              "parliament, software UI and docs, package descriptions, fiction, bible, medical "
              "terms, finance, lexicon)"),
    "en-de": "~81k pairs of extra genres (news, conversation, captions, software strings)"}


def backbone_origin(run_dir: Path) -> str:
    """How the backbone began: from random weights, or warm-started (warm_start.json)."""
    path = run_dir / "warm_start.json"
    if not path.exists():
        return "trained from scratch"
    start = json.loads(path.read_text())
    return (f"warm-started from the published `{start['backbone']}` (its weights; each "
            "piece of its own vocabulary starts from that backbone's embedding of the same "
            "text: trainer/recipes/warm_start.py), then trained")


def _role(direction: Direction) -> str:
    if direction == EN_FR:
        return "The embedded default of nmt-server"
    return "A further built-in direction of nmt-server, beside the default English→French"


def _command(direction: Direction) -> str:
    if direction == EN_FR:
        return "`make train-default`"
    return f"`--direction {direction.name}`; docs/DIRECTIONS.md"


def _eval_option(direction: Direction) -> str:
    return "" if direction == EN_FR else f" DIRECTION={direction.name}"


def _storage(gpu_run: Mapping[str, Any] | None) -> str:
    if gpu_run and gpu_run.get("storage") == "int8-rows":
        check = gpu_run["storage_check"]
        return ("stored as int8 with one scale per row, dequantized at load: mean dev BLEU "
                f"{check['int8_rows_dev_bleu']:.2f} against {check['float32_dev_bleu']:.2f} in "
                "float32")
    return ("stored as int8 with one scale per row, dequantized at load: within 0.1 BLEU of "
            "float16, benchmarks/results/compact_weights.md")


def _trained_for(gpu_run: Mapping[str, Any] | None, hours: float) -> str:
    if gpu_run:
        return f"{gpu_run['backbone']['seconds'] / 60:.1f} minutes on one {gpu_run['device']}"
    return f"{hours:.1f} h on a 2-core CPU"


def _cpu_budget(progress: Mapping[str, Any], epoch_tokens: int, pairs: int,
                averaged: str) -> list[str]:
    return [
        "## Training budget (2-core CPUs: bfloat16 autocast where the CPU has it natively, "
        "float32 elsewhere)", "",
        f"- backbone: {progress['step']} steps, {progress['target_tokens'] / 1e6:.1f}M target "
        f"tokens (about {progress['target_tokens'] / epoch_tokens:.2f} passes over "
        f"{pairs / 1e3:.0f}k pairs), "
        f"{progress['elapsed_s'] / 3600:.2f} h of training time, summed over every resumed or "
        "warm-started part (throughput by CPU: README, \"Retrain the embedded default\")."
        + averaged]


def _gpu_budget(gpu_run: Mapping[str, Any], progress: Mapping[str, Any], epoch_tokens: int,
                pairs: int, averaged: str) -> list[str]:
    backbone = gpu_run["backbone"]
    settings = backbone.get("settings", {})
    return [
        f"## Training budget (one {gpu_run['device']}, {gpu_run['minutes']} minutes for the "
        "whole run: backbone, averaging and the 7 adapters; `trainer/gpu/run.py`, its log "
        "in `benchmarks/results/gpu_run.json`)", "",
        f"- backbone: {progress['step']} steps, {progress['target_tokens'] / 1e6:.1f}M target "
        f"tokens seen (about {progress['target_tokens'] / epoch_tokens:.2f} passes over "
        f"{pairs / 1e3:.0f}k pairs), {backbone['seconds'] / 60:.1f} minutes at "
        f"{backbone['target_tokens_per_s']:,} target tokens/s, bfloat16 autocast, batches of "
        f"{settings.get('max_tokens', '?')} padded tokens; averaging window "
        f"{backbone['chosen_window']} of the last snapshots chosen on dev loss "
        f"({backbone['averaging_dev_loss']})." + averaged]
