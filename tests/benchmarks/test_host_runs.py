"""benchmarks/speed/engine/host_runs.py and the engine speed writer: engine_speed.md keeps one
run per host kind and mode, each named by its host; the bfloat16 row is benchmarked only
where the CPU runs bfloat16 natively."""

from __future__ import annotations

from pathlib import Path

from benchmarks.provenance import made_by
from benchmarks.speed.engine.engine_speed import BF16_PATH, SYSTEMS, default_systems
from benchmarks.speed.engine.host_runs import host_kind, merge, section_key, sections
from benchmarks.speed.engine.measure import Row
from benchmarks.speed.engine.report import write_results
from server.engine.host_paths import HostFeatures

AMD = "AMD EPYC 9R14 (AVX-512, VNNI, BF16, 2 CPUs)"
INTEL = "Intel(R) Xeon(R) Platinum 8488C (AVX-512, VNNI, BF16, AMX-BF16, AMX-INT8, 2 CPUs)"
# the AMD run as it was written before runs were kept per host (its title names no host)
AMD_RUN = (f"# Engine speed (full run)\n\n{made_by(command='make bench-engine', host=AMD)}\n\n"
           "| system | greedy |\n|---|---:|\n| engine-float32 | 2,650 |\n")


def run(host: str, mode: str, speed: str) -> str:
    return (f"# Engine speed on {host_kind(host)} ({mode} run)\n\n"
            f"{made_by(command='make bench-engine', host=host)}\n\n| engine-float32 | {speed} |\n")


def test_a_host_kind_is_the_label_without_its_cpu_count() -> None:
    assert host_kind(AMD) == "AMD EPYC 9R14 (AVX-512, VNNI, BF16)"
    assert host_kind("Some CPU (16 CPUs)") == "Some CPU"
    assert host_kind("NVIDIA H100 GPU, host X (AVX2, 16 CPUs)") == "NVIDIA H100 GPU, host X (AVX2)"


def test_each_host_kind_and_mode_keeps_its_own_run() -> None:
    text = merge(AMD_RUN, run(INTEL, "full", "1,100"))
    assert text.startswith(AMD_RUN.strip())  # the AMD run stays as it was
    assert [section_key(s) for s in sections(text)] == [
        (host_kind(AMD), "full"), (host_kind(INTEL), "full")]
    text = merge(text, run(INTEL, "quick", "900"))  # a quick run does not replace a full one
    text = merge(text, run(INTEL.replace("2 CPUs", "8 CPUs"), "full", "3,000"))
    found = sections(text)
    assert len(found) == 3 and found[0] == AMD_RUN.strip()
    assert "3,000" in found[1] and "1,100" not in text and "900" in found[2]
    text = merge(text, run(AMD, "full", "2,700"))  # a new AMD full run replaces the old
    assert "2,650" not in text and "2,700" in sections(text)[0]


def test_the_writer_adds_this_hosts_run_beside_the_others(tmp_path: Path) -> None:
    (tmp_path / "engine_speed.md").write_text(AMD_RUN)
    rows = [Row("engine-float32", "greedy", 1000.0, 1.0, 1, 32, 25, 800)]
    meta = {"mode": "quick", "host": {"label": INTEL, "torch_capability": "AVX512",
                                      "quantized_engine": "x86"}}
    write_results(rows, meta, tmp_path)
    write_results(rows, meta, tmp_path)  # again: replaces its own section
    found = sections((tmp_path / "engine_speed.md").read_text())
    assert len(found) == 2 and found[0] == AMD_RUN.strip()
    assert found[1].startswith(f"# Engine speed on {host_kind(INTEL)} (quick run)")
    assert "| engine-float32 | 1,000 |" in found[1]


def test_the_bfloat16_row_runs_only_on_cpus_with_native_bfloat16() -> None:
    engines = ("x86", "fbgemm", "onednn")
    native = HostFeatures(frozenset({"avx512f", "avx512_bf16"}), engines, "x86", True)
    emulated = HostFeatures(frozenset({"avx2"}), engines, "x86", False)
    assert default_systems(native) == list(SYSTEMS)
    assert default_systems(emulated) == [s for s in SYSTEMS if s != BF16_PATH]
