"""The tenants benchmark's markdown report (results/tenants.md), against the targets."""

from __future__ import annotations

from typing import Any

TARGETS = {"ratio_100": 0.9, "ratio_1000": 0.75}
LEAST_USED_LIMIT = 3.0  # the least-used 10 %'s p99 over one module's p99


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _per_batch(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _mib(value: float) -> str:
    return f"{value / 2**20:.1f} MiB"


def verdicts(result: dict[str, Any]) -> list[str]:
    lines = []
    for key, target in TARGETS.items():
        if key in result:
            met = "met" if result[key] >= target else "NOT met"
            lines.append(f"- `{key}` {result[key]:.2f} (target >= {target}): {met}")
    for key in sorted(k for k in result if k.startswith("least_used_p99_over_one_")):
        met = "met" if result[key] <= LEAST_USED_LIMIT else "NOT met"
        modules = key.rsplit("_", 1)[1]
        count = result.get(f"least_used_requests_{modules}")
        over = "" if count is None else f", at least {count} requests in each run's bucket"
        lines.append(f"- least-used 10 % p99 / one module's p99 at {modules} modules: "
                     f"{result[key]:.2f} (target <= {LEAST_USED_LIMIT:g}{over}): {met}")
        strict = result.get(f"strict_tenth_p99_over_one_{modules}")
        if strict is not None:
            lines.append(f"  - the strict 10 % alone (no growth; at least "
                         f"{result.get(f'strict_tenth_requests_{modules}')} requests, a p99 "
                         f"over few requests is their slowest): {strict:.2f}")
    within = result["host_memory_bytes"] <= result["budget_bytes"]
    lines.append(f"- host tier at most {_mib(result['host_memory_bytes'])} against a budget "
                 f"of {_mib(result['budget_bytes'])} ({result['budget_share']:.0%} of the "
                 f"{result['modules']} modules' {_mib(result['modules_bytes'])}): "
                 f"{'within' if within else 'OVER'}; evictions {result['host_evictions']:.0f} "
                 f"(host), {result['slot_evictions']:.0f} (slots)")
    return lines


def markdown(result: dict[str, Any]) -> str:
    rows = ["| run | modules | requests | modules used | tokens/s | ratio | p50 ms | p99 ms "
            "| cold requests | p99 cold ms | p99 least-used 10 % ms | least-used modules / "
            "requests | sentences a batch |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for run in result["runs"]:
        rows.append(f"| {run['label']} | {run['modules']} | {run['requests']} | "
                    f"{run['modules_used']} | {run['tokens_per_s']:.1f} | "
                    f"{run['ratio']:.2f} | {_ms(run['p50_ms'])} | "
                    f"{_ms(run['p99_ms'])} | {run['cold_requests']} | "
                    f"{_ms(run['p99_cold_ms'])} | {_ms(run['p99_least_used_ms'])} | "
                    f"{run.get('least_used_modules', '-')} / "
                    f"{run.get('least_used_requests', '-')} | "
                    f"{_per_batch(run.get('sentences_per_batch'))} |")
    registry, slots = result["registry"], result.get("slots", 16)
    registry_rows = [f"| {key.removesuffix('_ms').replace('_', ' ')} | {value:.2f} |"
                     for key, value in registry.items() if key.endswith("_ms")]
    registry_part = [f"## Registry at {registry['modules']} modules (SQLite, median ms)", "",
                     "| call | ms |", "|---|---:|", *registry_rows] if registry else [
        "Registry: not measured in this run."]
    return "\n".join([
        "# Tenants: many modules on one backbone",
        "",
        f"{result['modules']} residual adapters (bottleneck 64, each the shipped `law` "
        "adapter cut to 64 units plus its own perturbation), published to the store and "
        "served through `Runtime` and the `Scheduler` (no HTTP). Closed-loop clients send one "
        "sentence each at a time, its module drawn over the first N modules (Zipf s = 1 or "
        f"uniform); batches mix modules (at most {slots} per batch, {slots} device slots; "
        f"adapters {result['adapters']}, {result['clients']} clients, "
        f"{result['requests']} requests a run in {result['rounds']} rounds; engine on "
        f"{result.get('device', 'cpu')} in {result.get('dtype', 'float32')}). The host "
        "tier is bounded by `NMT_ENGINE__HOST_BUDGET_BYTES`; a cold module is read by a "
        "worker thread while the other sentences decode. Ratio: tokens/s against one "
        "module, the median over rounds of each round's ratio (the runs take turns in "
        "rounds; a stall of the shared host hits a round, not a run). The least-used "
        "10 %: the modules with the fewest requests in a run, grown by the next ones until "
        f"they hold at least {result.get('least_used_min', 100)} requests, so that their "
        "p99 is not one stalled request.",
        "",
        *verdicts(result),
        f"- p99 of a cold-module request (worst run): {_ms(result['p99_cold_ms'])} ms; "
        f"module reads off the engine thread {result['reads_off_engine_thread']:.0f} "
        f"({result.get('warm_up_reads', 0):.0f} of them unmeasured, bringing the host tier to "
        f"a run's steady state before its turn), on it "
        f"{result['reads_on_engine_thread']:.0f}; slot loads {result['slot_loads']:.0f}, "
        f"slot hits {result['slot_hits']:.0f}",
        "",
        *rows,
        "",
        *registry_part,
        "",
    ])
