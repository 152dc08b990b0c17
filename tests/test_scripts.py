"""The console scripts of `[project.scripts]` and their `python -m` forms."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
with (ROOT / "pyproject.toml").open("rb") as _handle:
    SCRIPTS: dict[str, str] = tomllib.load(_handle)["project"]["scripts"]
# The `python -m` form of each script.
MODULES = {"nmt-server": "server", "nmt-trainer": "trainer", "nmt-convert": "converters",
           "nmt-eval": "benchmarks.quality.evaluation.evaluate"}


def test_the_four_scripts_are_declared() -> None:
    assert set(SCRIPTS) == set(MODULES)


@pytest.mark.parametrize("script", sorted(MODULES))
def test_entry_point_help(script: str, capsys: pytest.CaptureFixture[str]) -> None:
    module_name, _, function = SCRIPTS[script].partition(":")
    main = getattr(importlib.import_module(module_name), function)
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {script} ")


@pytest.mark.parametrize("script", sorted(MODULES))
def test_python_m_form_help(script: str) -> None:
    result = subprocess.run([sys.executable, "-m", MODULES[script], "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {script} ")


def test_installed_scripts_match_the_project() -> None:
    """Where this tree's distribution is installed with its scripts, they point at the
    same functions (the shared development venv may hold an older install)."""
    installed = {ep.name: ep.value for ep in importlib.metadata.entry_points(
        group="console_scripts") if ep.name in SCRIPTS}
    if not installed:
        pytest.skip("the console scripts are not installed in this environment")
    assert installed == SCRIPTS
