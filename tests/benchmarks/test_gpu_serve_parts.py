"""The GPU serve run's parts beyond serve_gpu, end to end on the CPU with tiny settings (as
`DEVICE=cpu` rehearses them): the tenants benchmark through a few device slots, and the
retrieval speed comparison on a memory written here; and the run's script keeps its parts'
time limits inside the call's (nothing here asserts on speed)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from benchmarks.speed.gpu import retrieval_gpu
from benchmarks.speed.tenants import tenants
from model_store import BUILTIN_DIR

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "speed" / "gpu" / "gpu_serve_run.sh"
CALL_LIMIT_S = 570  # the script's run(...) line: timeout_s
UNPACKING_S = 30  # packages, CTranslate2 and the memory unpacked, imports checked

TRAIN = [("The patient should take one tablet every morning.",
          "Le patient doit prendre un comprimé chaque matin."),
         ("Do not store above 25 degrees.", "Ne pas conserver au-dessus de 25 degrés."),
         ("Keep this medicine out of the reach of children.",
          "Tenir ce médicament hors de la portée des enfants."),
         ("Tell your doctor if you feel dizzy.", "Informez votre médecin si vous avez des "
                                                 "vertiges."),
         ("The tablets contain lactose.", "Les comprimés contiennent du lactose."),
         ("Swallow the capsule whole with water.", "Avalez la gélule entière avec de l'eau.")]
TEST = [("The patient should take two tablets every morning.",
         "Le patient doit prendre deux comprimés chaque matin."),
        ("Keep this medicine out of the sight of children.",
         "Tenir ce médicament hors de la vue des enfants."),
        ("Tell your pharmacist if you feel dizzy.",
         "Informez votre pharmacien si vous avez des vertiges."),
        ("Do not store above 30 degrees.", "Ne pas conserver au-dessus de 30 degrés.")]


def shipped(*names: str) -> None:
    for name in names:
        if not (BUILTIN_DIR / "modules" / name).is_dir():
            pytest.skip(f"no shipped {name} module")


@pytest.mark.slow
def test_tenants_run_end_to_end_through_a_few_device_slots(tmp_path: Path) -> None:
    shipped("law")
    tenants.main(["--modules", "20", "--spreads", "20", "--requests", "12", "--rounds", "1",
                  "--clients", "2", "--slots", "3", "--registry-modules", "20",
                  "--device", "cpu", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "tenants.json").read_text())
    assert [run["label"] for run in result["runs"]] == ["one", "20-zipf", "20-uniform"]
    assert all(run["requests"] == 12 and run["tokens_per_s"] > 0 for run in result["runs"])
    assert result["slots"] == 3 and result["dtype"] == "float32" and result["device"] == "cpu"
    assert result["slot_evictions"] > 0  # 20 modules through 3 slots
    # cold modules are read back off the engine thread before their batch; the engine's
    # own read is a safety net (a read-back module evicted again before its batch, which a
    # busy host's timing can cause with a budget of 4 modules), never the rule
    assert result["reads_off_engine_thread"] > 0
    assert result["reads_on_engine_thread"] * 10 <= result["reads_off_engine_thread"]
    assert result["registry"]["modules"] == 20
    text = (tmp_path / "tenants.md").read_text()
    assert "3 device slots" in text and "engine on cpu in float32" in text


@pytest.mark.slow
def test_retrieval_speed_runs_end_to_end_with_a_written_memory(tmp_path: Path) -> None:
    shipped("medical")
    folder = tmp_path / "data" / "domains" / "medical"
    folder.mkdir(parents=True)
    for split, pairs in (("train", TRAIN), ("test", TEST)):
        (folder / f"{split}.en").write_text("".join(f"{s}\n" for s, _ in pairs))
        (folder / f"{split}.fr").write_text("".join(f"{t}\n" for _, t in pairs))
    assert retrieval_gpu.main(["--device", "cpu", "--data", str(tmp_path / "data"),
                               "--beams", "1", "--sentences", "4", "--repeats", "1",
                               "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "memory_retrieval-speed-cpu.json").read_text())
    assert result["memory_pairs"] == len(TRAIN) and result["dtype"] == "float32"
    assert [(row["beam"], row["batch"], row["sentences"]) for row in result["speed"]] == \
        [(1, 32, 4), (1, 1, 1)]
    for row in result["speed"]:
        assert min(row["tokens_per_s_off"], row["tokens_per_s_on"],
                   row["tokens_per_s_warm"]) > 0
    assert "| 1 | 32 | 4 |" in (tmp_path / "memory_retrieval-speed-cpu.md").read_text()


def test_the_parts_fit_in_the_call() -> None:
    text = SCRIPT.read_text()
    limits = {name.lower(): int(seconds) for name, seconds in
              re.findall(r"^([A-Z]+)_TIMEOUT=\$\{[A-Z]+_TIMEOUT:-(\d+)\}", text, re.MULTILINE)}
    assert set(limits) == {"tests", "serve", "tenants", "retrieval", "mixed", "bulk"}
    parts = re.search(r"PARTS=\$\{PARTS:-([a-z,]+)\}", text)
    assert parts is not None
    default = set(parts[1].split(","))
    # mixed and bulk run when named (no room beside the others); together they fit a call
    assert default == set(limits) - {"mixed", "bulk"}
    assert limits["mixed"] + limits["bulk"] + UNPACKING_S <= CALL_LIMIT_S
    assert f"timeout_s={CALL_LIMIT_S})" in text
    assert sum(limits[name] for name in default) + UNPACKING_S <= CALL_LIMIT_S
    page = (ROOT / "docs" / "GPU.md").read_text()
    for name, seconds in limits.items():  # the header's and docs/GPU.md's tables say the same
        assert re.search(rf"^#\s+{name}\s+{seconds}\s", text, re.MULTILINE), name
        assert f"| `{name}` | {seconds} s |" in page, name
    assert f"({CALL_LIMIT_S} s)" in page


def test_the_script_checks_the_host_and_bundles_its_results(tmp_path: Path) -> None:
    out = tmp_path / "out"
    environment = os.environ | {"DEVICE": "cpu", "PARTS": "none", "PY": sys.executable,
                                "OUT": str(out)}
    done = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env=environment, timeout=120,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    checks = (out / "checks.txt").read_text()
    assert "server imports" in checks and "CTranslate2 ceiling:" in checks
    assert "=== " not in checks  # PARTS names none of the parts
    with tarfile.open(out / "results.tar.xz") as bundle:
        assert bundle.getnames() == ["."]  # no part ran: an empty bundle, no data in it
    assert sorted(p.name for p in out.iterdir()) == ["checks.txt", "results.tar.xz"]
