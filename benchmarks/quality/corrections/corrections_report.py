"""The markdown of `make bench-corrections` (benchmarks/quality/corrections/corrections.py),
also rebuilt from its JSON:
`python -m benchmarks.quality.corrections.corrections_report corrections.json`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.provenance import made_by
from benchmarks.report_files import write_stamped


def _scores(block: dict[str, Any]) -> str:
    return f"{block['bleu']:.2f} / {block['chrf']:.2f}"


def _gate(job: dict[str, Any]) -> str:
    scores = job["scores"] or {}
    dev, held = scores.get("dev"), scores.get("held_out_corrections")
    if not dev or not held:
        return "not trained"
    low, high = held.get("delta_chrf_95", [float("nan"), float("nan")])
    return (f"dev BLEU {dev['served']['bleu']:.2f} -> {dev['refreshed']['bleu']:.2f}; "
            f"{held.get('sentences', '?')} held back: BLEU {held['served']['bleu']:.2f} -> "
            f"{held['refreshed']['bleu']:.2f}, chrF {held['served']['chrf']:.2f} -> "
            f"{held['refreshed']['chrf']:.2f} (95%: {low:+.2f} to {high:+.2f}): "
            f"{scores.get('gate')}")


def _router(job: dict[str, Any]) -> str:
    router = (job["result"] or {}).get("router") or {}
    check = router.get("check")
    if not check:
        return str(router.get("note", "-"))
    return (f"v{router['classifier_version']}: dev {check['dev_before']:.0%} -> "
            f"{check['dev_after']:.0%}, held back {check['held_before']:.0%} -> "
            f"{check['held_after']:.0%}")


def _baseline_training(base: dict[str, Any]) -> str:
    """How long the baseline trained and what stopped it (its job's own report)."""
    cap = base["job"]["options"]["max_steps"]
    trained = base["job"]["scores"].get("training", {})
    if "steps" not in trained:
        return f"at most {cap} steps"
    stopped = {"max_steps": f"the cap of {cap} steps", "max_epochs": "its epoch limit",
               "max_minutes": "its time budget",
               "early stopping": "early stopping (dev BLEU no longer improved)"}
    reason = trained.get("stop_reason", "")
    return f"{trained['steps']} steps, ended by {stopped.get(reason, reason)}"


def markdown(result: dict[str, Any], args: argparse.Namespace) -> str:
    base, shipped = result["baseline"], result["shipped"]
    domain = args.domain
    lines = [
        f"# Refreshing the {domain} module from corrections",
        "",
        f"**How it is simulated.** The shipped {domain} module was trained on the whole "
        f"train split, so no unused in-domain pairs are left. The bench trains its own "
        f"baseline {domain} module on the first {base['lines']} lines of the train split "
        f"(the shipped recipe's adapter settings: {_baseline_training(base)}; the "
        "shipped module's 516 steps over 4,899 pairs scaled to the lines would be "
        f"{round(516 * base['lines'] / 4899)}), through the "
        "sidecar as a domain job, and it stands in for the shipped module. Corrections are "
        f"simulated from the remaining {result['simulated']['pool']} train lines, which it "
        "never saw: machine output = the baseline's translation, correction = the reference "
        f"({result['simulated']['unchanged_skipped']} of {result['simulated']['translated']} "
        "translated lines equal their reference and are skipped). They are sent with `POST "
        "/corrections` to a live server, approved, and a refresh is queued with `POST "
        f"/admin/corrections/refresh` once {', '.join(f'{c:,}' for c in args.counts)} have "
        "arrived (cumulative: each "
        "refresh trains on the corrections no earlier refresh used, from the module served "
        f"then, {args.refresh_epochs} epoch(s); {args.original_pairs} of the baseline's own "
        "pairs and the corrections earlier refreshes used replayed, corrections x4, "
        "20% held back for the gate). Test: the "
        f"{domain} test split ({result['test_lines']} lines, greedy, sacrebleu).",
        "",
        "| module | corrections | test BLEU / chrF | vs baseline BLEU | refresh job | "
        "gate | router (share routed to the domain) | requests under load (failed) |",
        "|---|---|---|---|---|---|---|---|",
        f"| shipped v{shipped['version']} (all 4,980 train lines; reference only) | - | "
        f"{_scores(shipped['test'])} | | | | | |",
        f"| baseline v{base['version']} ({base['lines']} lines) | 0 | "
        f"{_scores(base['test'])} | | {base['job']['state']} ({base['job']['seconds']:.0f} "
        f"s) | | | |",
    ]
    for row in result["stages"]:
        job = row["job"]
        gain = row["test"]["bleu"] - base["test"]["bleu"]
        refused = row.get("test_refused_candidate")
        note = (f"; refused candidate: {_scores(refused)}" if refused else "")
        lines.append(
            f"| served v{row['active_version']} | {row['corrections']} "
            f"({row['sent']['refused']} refused as implausible) | {_scores(row['test'])}"
            f"{note} | {gain:+.2f} | {job['state']} ({job['seconds']:.0f} s) | "
            f"{_gate(job)} | {_router(job)} | {row['load']['requests']} "
            f"({row['load']['failed']}) |")
    others = result["others"]
    poison = result["poison"]
    job = poison["job"]
    chosen = (job.get("scores") or {}).get("refresh", {}) if "scores" in job else {}
    why = (f"{chosen.get('contradict_own_data', 0)} left out before training as contradicting "
           f"the domain's own pairs; the job (with the corrections earlier refreshes left "
           f"unused) ended {job['state']}: {job.get('error') or 'published'}"
           if "scores" in job else str(job))
    final = result["stages"][-1]
    lines += [
        "",
        f"- Target: +2 BLEU at 1,000 corrections: measured "
        f"{final['test']['bleu'] - base['test']['bleu']:+.2f} at {final['corrections']} "
        f"({'met' if final['test']['bleu'] - base['test']['bleu'] >= 2 else 'NOT met'}).",
        f"- Other domains ({', '.join(others['domains'])}): module weights "
        f"{'bit-identical' if others['modules_unchanged'] else 'CHANGED'}, their "
        f"translations of 5 test sentences each "
        f"{'identical' if others['translations_unchanged'] else 'CHANGED'}.",
        f"- Failed requests while the refreshes trained and published: "
        f"{sum(r['load']['failed'] for r in result['stages'])} of "
        f"{sum(r['load']['requests'] for r in result['stages'])}.",
        f"- Poisoning: '{poison['term']}' flipped to '{poison['flip']}' in "
        f"{poison['sent']['sent']} of the baseline's own training lines, sent and approved: "
        f"{str(why).replace('|', '/')}",
        "",
        "Raw numbers: the .json beside this file.",
    ]
    return "\n".join(lines) + "\n"


def rebuild(path: Path) -> Path:
    """The markdown beside a results JSON, written again from it and stamped with the
    command and host that made the JSON."""
    saved = json.loads(path.read_text())
    raw = saved["args"]
    args = argparse.Namespace(domain=raw["domain"], original_pairs=int(raw["original_pairs"]),
                              refresh_epochs=int(raw.get("refresh_epochs", 3)),
                              counts=json.loads(raw["counts"]))
    return write_stamped(path.with_suffix(".md"), markdown(saved, args),
                         made_by=made_by(command=saved["command"], host=saved["host"]))


if __name__ == "__main__":
    rebuild(Path(sys.argv[1]))
