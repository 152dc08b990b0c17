"""The markdown of `benchmarks.quality.memory_retrieval`'s results (what a reader reads)."""

from __future__ import annotations

from typing import Any

CONFIGURATIONS = ("backbone", "backbone+memory", "adapter", "adapter+memory")


def speed_lines(r: dict[str, Any]) -> list[str]:
    lines = ["| batch | sentences | tokens/s off | tokens/s on | ratio | tokens/s on, pairs "
             "cached | ratio |", "|---|---|---|---|---|---|---|"]
    return lines + [f"| {s['batch']} | {s['sentences']} | {s['tokens_per_s_off']} | "
                    f"{s['tokens_per_s_on']} | {s['ratio']} | {s.get('tokens_per_s_warm', '-')}"
                    f" | {s.get('ratio_warm', '-')} |" for s in r["speed"]]


def selection_lines(selection: dict[str, Any]) -> list[str]:
    """The dev grid: each point's mean and worst domain against the adapter alone."""
    lines = ["| settings | dev mean adapter+memory | vs adapter | worst domain vs adapter |",
             "|---|---|---|---|"]
    for row in selection["grid"]:
        lines.append(f"| {row['point']} | {row['dev_bleu']} | {row['gain']:+.2f} | "
                     f"{row['worst_domain']} {row['worst_gain']:+.2f} |")
    return lines + ["", f"Adapter alone on dev: {selection['adapter_dev_bleu']}. Chosen: "
                        f"{selection['chosen']} ({selection['rule']})."]


def gate_cell(row: dict[str, Any]) -> str:
    gates = [row.get(f"{k} gate") for k in ("backbone+memory", "adapter+memory")]
    return " / ".join(f"{g:g}" for g in gates if g is not None) or "-"


def markdown(r: dict[str, Any]) -> str:
    if r.get("speed_only"):
        return "\n".join([f"# Retrieval during decoding: speed only ({r['direction']})", "",
                          f"Beam {r['beam']}; medical test sentences, the adapter, the "
                          "server's default retrieval settings; best of "
                          f"{r.get('repeats', 2)} interleaved runs each. On: every pair "
                          "forced (cache emptied first); cached: the same sentences again.",
                          "",
                          *speed_lines(r)]) + "\n"
    keys = CONFIGURATIONS
    lines = [f"# Translation memories, part 2: retrieval during decoding ({r['direction']})",
             "", f"Beam {r['beam']}; test sentences per set: {r['limit'] or 'all'}; dev "
             f"sentences per domain: {r['dev_limit'] or 'all'}.", "",
             "## Settings chosen on the dev sets", "", *selection_lines(r["selection"]), "",
             "## Test sets (scored once, with the chosen settings)", "",
             "| domain | sentences (novel) | " + " | ".join(keys) + " | adapter+memory "
             "vs adapter | gate (backbone / adapter) |", "|---|---|" + "---|" * (len(keys) + 2)]
    for row in r["domains"]:
        cells = [f"{row[k]} ({row[f'{k} novel']})" for k in keys]
        lines.append(f"| {row['domain']} | {row['sentences']} ({row['novel']}) | "
                     + " | ".join(cells)
                     + f" | {row['adapter+memory'] - row['adapter']:+.2f} | "
                     f"{gate_cell(row)} |")
    lines.append("| **mean** | | " + " | ".join(
        f"{r['mean'][k]} ({r['mean_novel'][k]})" for k in keys)
        + f" | {r['mean']['adapter+memory'] - r['mean']['adapter']:+.2f} | |")
    lines += ["", "BLEU on all sentences (in brackets: only those with no >= 75 match). Gate: "
              "the memory's own, calibrated from its pairs for the module it decodes with "
              "(server/serving/gate_calibration.py), or the settings' when calibration is "
              "off.", "",
              "| routed set | sentences | routed to a domain | memories off | memories on |",
              "|---|---|---|---|---|"]
    lines += [f"| {g['set']} | {g['sentences']} | {g['routed_to_a_domain']} | "
              f"{g['memories off']} | {g['memories on']} |" for g in r["general"]]
    lines += ["", *speed_lines(r)]
    lines += ["", f"Stored per memory besides its text: {r['stored_bytes_per_memory_besides_text']}"
              " bytes (its calibrated gates, one registry row per module it decodes with; "
              "datastores are built per request from the retrieved pairs; a "
              f"{r['stored_note']})."]
    if r.get("host_note"):
        lines += ["", r["host_note"]]
    return "\n".join(lines) + "\n"
