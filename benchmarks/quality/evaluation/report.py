"""eval.md: the results JSON rendered as markdown tables (nothing computed here but
formatting; every number comes from the JSON)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.quality.evaluation.significance import LEVEL, RESAMPLES

Row = Mapping[str, Any]
MET = {True: "met", False: "**not met**", None: "not evaluated"}


def _table(header: Sequence[str], rows: Sequence[Sequence[str]],
           align: Sequence[str] | None = None) -> str:
    marks = align or ["---"] + ["---:"] * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def millions(count: int | None) -> str:
    if count is None:
        return ""
    return f"{count / 1e6:.2f}M" if count >= 100_000 else f"{count / 1e3:.1f}k"


def _params_cell(row: Row, backbone: int) -> str:
    count = row.get("parameters")
    if count is None:
        return ""
    if row.get("group") in ("baseline", "fine-tuning"):
        return millions(count)
    share = 100.0 * count / max(backbone, 1)
    return f"+{millions(count)} ({share:.1f}%)"


def score_table(rows: Mapping[str, Row], sets: Sequence[str], metric: str, *,
                backbone: int) -> str:
    header = ["system", "#P", *sets, "avg"]
    body = []
    for row in rows.values():
        cells = [f"{row['scores'][s][metric]:.2f}" if s in row["scores"] else "—" for s in sets]
        average = row.get("average")
        mean = f"{average[metric]:.2f}" if average else "—"
        if average and average["sets"] < len(sets):
            mean += f" ({average['sets']} sets)"
        body.append([row["label"], _params_cell(row, backbone), *cells, mean])
    return _table(header, body)


def _counts(counts: Mapping[str, int]) -> str:
    """"200" when every set has 200 sentences, else "it 150, law 200"."""
    values = set(counts.values())
    if len(values) == 1:
        return str(values.pop())
    return ", ".join(f"{name} {count}" for name, count in counts.items()) or "0"


def _setup(result: Mapping[str, Any]) -> str:
    meta, params = result["meta"], result["parameters"]
    machine = meta["machine"]
    backbone = params["backbone"]
    lines = [
        f"- mode: **{meta['mode']}**; data: `{meta['data']}`; "
        f"{_counts(meta['sentences_per_domain'])} test sentences per domain, "
        f"{_counts(meta['sentences_per_genre'])} per open-domain genre (the first lines of "
        "each test set)",
        f"- backbone: {backbone['name']} v{backbone['version']} "
        f"({millions(backbone['parameters'])} parameters); served modules: "
        f"{len(params['served'])} ({meta['served_family']}); classifier: "
        f"{meta['classifier'] or 'none'}",
        f"- decoding: `Engine.translate`, beam {meta['decoding']['beam_size']}, batches of "
        f"<= {meta['decoding']['batch_size']} sentences sorted by length, max_length = "
        f"engine.max_length(source) (1.5 x source + 10, <= "
        f"{meta['decoding']['length_limit']}); scores: sacrebleu corpus BLEU and chrF",
        f"- routing: {meta['routing']}",
        f"- machine: {machine['cpu']} ({machine['cores']} cores, torch "
        f"{machine['torch']}, {machine['threads']} threads, load average at start "
        f"{machine['load_average']}); total {meta['total_seconds'] / 60:.1f} min ("
        + ", ".join(f"{k.replace('_', ' ')} {v / 60:.1f}"
                    for k, v in meta.get("section_seconds", {}).items()) + ")",
    ]
    return "\n".join(lines)


def _finetune(section: Mapping[str, Any]) -> str:
    summary, runs = section["summary"], section["runs"]
    if not summary:
        return "_No fine-tuning run (see notes)._"
    body = [[domain, f"{row['in_domain']:.2f}", _number(row["adapter"]),
             f"{row['generic']:.2f}", _number(row["forgetting"], signed=True),
             f"{runs[domain]['steps']} steps, {runs[domain]['train_seconds'] / 60:.1f} min"]
            for domain, row in sorted(summary.items())]
    header = ["fine-tuned on", "in-domain BLEU", "adapter", "generic",
              "mean ΔBLEU other domains", "training"]
    return _table(header, body)


def _number(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _learnable(*sections: Mapping[str, Row]) -> str:
    rows = [s["ensemble-learnable"] for s in sections if "ensemble-learnable" in s]
    if not rows:
        return ""
    body = []
    for row in rows:
        body += _search_rows(row)
    return _table(["set", "weights", "dev BLEU", "evaluations", "dev sentences"], body,
                  ["---", "---", "---:", "---:", "---"])


def _search_rows(row: Row) -> list[list[str]]:
    body = []
    for name, search in row["search"].items():
        weights = ", ".join(f"{k} {v:.2f}" for k, v in
                            sorted(search["weights"].items(), key=lambda i: -i[1]))
        body.append([name, weights, f"{search['dev_bleu']:.2f}",
                     str(search["evaluations"]),
                     f"{search['dev_sentences']} ({search['dev_split']})"])
    return body


def _classifier(section: Mapping[str, Any]) -> str:
    report = section.get("accuracy_report")
    if not report:
        return "_No classifier in the store._"
    labels = sorted({p for counts in report["confusion"].values() for p in counts})
    accuracy = _table(["domain", "accuracy"],
                      [[d, f"{a:.1%}"] for d, a in report["accuracy"].items()]
                      + [["**overall**", f"{report['overall']:.1%}"]])
    confusion = _table(["true \\ predicted", *labels],
                       [[d, *(str(c.get(p, 0)) for p in labels)]
                        for d, c in report["confusion"].items()])
    return (accuracy + "\n\nConfusion matrix (test sentences):\n\n" + confusion
            + _calibration(section.get("calibration")))


def _calibration(report: Mapping[str, Any] | None) -> str:
    if not report:
        return ""
    rows = [("as served", report["served"])]
    if "uncalibrated" in report:
        rows = [(f"as served (temperature {report['temperature']:.2f})", report["served"]),
                ("fastText's own (temperature 1)", report["uncalibrated"])]
    table = _table(["posteriors", "mean confidence", "accuracy", "NLL", "ECE"],
                   [[name, f"{s['mean_confidence']:.3f}", f"{s['accuracy']:.3f}",
                     f"{s['nll']:.3f}", f"{s['ece']:.3f}"] for name, s in rows])
    return ("\n\nCalibration on the same test sentences (NLL of the true domain; ECE over "
            "10 confidence bins):\n\n" + table)


def _routing(section: Mapping[str, Any]) -> str:
    routing = section.get("routing")
    if not routing:
        return ""
    body = []
    for name, row in routing.items():
        modes = ", ".join(f"{m} {c}" for m, c in row["modes"].items())
        top = ", ".join(f"{d} {c}" for d, c in list(row["predicted"].items())[:3])
        body.append([name, modes, top, f"{row['mean_confidence']:.2f}"])
    return _table(["set", "decisions (as served)", "top predicted", "mean confidence"], body,
                  ["---", "---", "---", "---:"])


def _parameters(params: Mapping[str, Any]) -> str:
    backbone = params["backbone"]["parameters"]
    body = [["backbone", "—", millions(backbone), "100%"]]
    for group, modules in [("served", params["served"]), *params["families"].items()]:
        for domain, row in modules.items():
            body.append([f"{group}: {domain}", row["family"], millions(row["parameters"]),
                         f"{row['percent_of_backbone']:.2f}%"])
    mixing = params.get("mixing")  # absent in results written before the mixing rows
    if mixing:
        body.append([f"mixing: {mixing['name']} ({len(mixing['domains'])} domains)",
                     mixing["family"], millions(mixing["parameters"]),
                     f"{mixing['percent_of_backbone']:.2f}%"])
    return _table(["artifact", "family", "#P", "of backbone"], body)


def _timings(result: Mapping[str, Any]) -> str:
    body = []
    for section in ("known_domains", "families", "open_domain"):
        for key, row in result[section].items():
            timing = row["timing"].values()
            seconds = sum(t["seconds"] for t in timing)
            tokens = sum(t["target_tokens"] for t in timing)
            body.append([f"{section}: {key}", str(sum(t["decoded"] for t in timing)),
                         str(sum(t["reused"] for t in timing)), f"{seconds:.1f}",
                         f"{tokens / seconds:.0f}" if seconds > 0 else "—"])
    for key, row in result["finetuning"]["rows"].items():
        timing = row["timing"].values()
        seconds = sum(t["seconds"] for t in timing)
        tokens = sum(t["target_tokens"] for t in timing)
        body.append([f"fine-tuning: {key}", str(sum(t["decoded"] for t in timing)), "0",
                     f"{seconds:.1f}", f"{tokens / seconds:.0f}" if seconds > 0 else "—"])
    return _table(["system", "decoded", "reused", "seconds", "target tok/s"], body)


def _significance(rows: Sequence[Mapping[str, Any]]) -> str:
    """Results written before the significance section have none: a dash."""
    if not rows:
        return "—"
    body = [[row["comparison"], row["sets"], f"{row['difference']:+.2f}",
             f"{row['low']:+.2f} to {row['high']:+.2f}"] for row in rows]
    return _table(["difference (BLEU)", "sets", "observed", f"{LEVEL:.0%} interval"], body,
                  ["---", "---", "---:", "---:"])


def _reliance(section: Mapping[str, Row] | None) -> str:
    """Results written before this section have none: a dash."""
    if not section:
        return "—"
    body = [[name, str(row["sentences"]), f"{row['nll_own_source']:.2f}",
             f"{row['nll_other_source']:.2f}", f"{row['gap']:.2f}"]
            for name, row in section.items()]
    table = _table(["set", "sentences", "own source", "another sentence's source", "gap"],
                   body)
    return ("Teacher-forced NLL per reference token (nats) of the plain backbone, given each "
            "sentence's own source and given another sentence's source of the same set "
            "(rotated by one). The gap is what the model takes from the source: a model that "
            "translates well shows several nats; a small gap means fluent target-language "
            "text that often ignores its input.\n\n" + table)


def render(result: Mapping[str, Any]) -> str:
    domains, genres = result["meta"]["domains"], result["meta"]["genres"]
    backbone = result["parameters"]["backbone"]["parameters"]
    known = {**result["known_domains"], **result["families"],
             **result["finetuning"]["rows"]}
    open_rows = result["open_domain"]
    targets = _table(["target", "value", "status"],
                     [[t["description"], t["value"], MET[t["met"]]] for t in result["targets"]],
                     ["---", "---", "---"])
    parts = [
        f"# Multi-domain evaluation ({result['meta']['mode']})", _setup(result),
        "## Known domains: BLEU", score_table(known, domains, "bleu", backbone=backbone),
        "## Known domains: chrF", score_table(known, domains, "chrf", backbone=backbone),
        "## Full fine-tuning: in-domain upper bound and forgetting",
        _finetune(result["finetuning"]),
        "## Open domain (genres without a module): BLEU",
        score_table(open_rows, genres, "bleu", backbone=backbone) if open_rows else "—",
        "## Open domain: chrF",
        score_table(open_rows, genres, "chrf", backbone=backbone) if open_rows else "—",
        "### Dev-tuned (learnable) weights",
        _learnable(open_rows, result["known_domains"]) or "—",
        "## Classifier (test sets)", _classifier(result["classifier"]),
        "### Routing as served, per set", _routing(result["classifier"]) or "—",
        "## Parameters (#P)", _parameters(result["parameters"]),
        "## Backbone: reliance on the source", _reliance(result.get("source_reliance")),
        "## Targets", targets,
        f"### Significance (paired bootstrap, {RESAMPLES:,} resamples, "
        f"{LEVEL:.0%} intervals)", _significance(result.get("significance", [])),
        "## What this shows", result["summary"],
        "## Method", "\n".join(f"- {item}" for item in result["meta"]["method"]),
        "## Notes", "\n".join(f"- {note}" for note in result["notes"]) or "—",
        "## Timings (decoding)", _timings(result),
    ]
    return "\n\n".join(parts) + "\n"
