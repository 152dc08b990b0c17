"""`make system-packages`, which `make test` runs first: with every package installed it does
nothing (no network); with one missing it installs it with apt, non-interactively and
without recommended packages, when it runs as root, and otherwise names it. The apt-get it
calls here is a stand-in that records its arguments (APT_GET=...), so nothing is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ABSENT = "nmt-no-such-package"


@pytest.fixture
def fake_apt_get(tmp_path: Path) -> tuple[Path, Path]:
    """An apt-get that logs `DEBIAN_FRONTEND args...` to a file; (program, log)."""
    if shutil.which("make") is None or shutil.which("dpkg-query") is None:
        pytest.skip("needs make and dpkg-query (a Debian system)")
    log = tmp_path / "apt-get.log"
    program = tmp_path / "apt-get"
    program.write_text(f'#!/bin/sh\necho "$DEBIAN_FRONTEND $*" >> {log}\n')
    program.chmod(0o755)
    return program, log


def make_system_packages(packages: str, apt_get: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return subprocess.run(["make", "--no-print-directory", "system-packages",
                           f"SYSTEM_PACKAGES={packages}", f"APT_GET={apt_get}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def test_nothing_runs_when_every_package_is_installed(fake_apt_get: tuple[Path, Path]) -> None:
    program, log = fake_apt_get
    done = make_system_packages("dpkg", program)  # dpkg is installed wherever dpkg-query is
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and not log.exists()


def test_a_missing_package_is_installed_as_root_and_named_otherwise(
        fake_apt_get: tuple[Path, Path]) -> None:
    program, log = fake_apt_get
    done = make_system_packages(f"dpkg {ABSENT}", program)
    assert done.returncode == 0, done.stderr
    if os.geteuid() == 0:
        assert log.read_text().splitlines() == [
            "noninteractive update -q",
            f"noninteractive install -y -q --no-install-recommends {ABSENT}",
        ]
    else:
        assert not log.exists()
        assert ABSENT in done.stdout and "dpkg" not in done.stdout.replace("dpkg-query", "")


def test_make_test_sets_up_the_system_packages_before_the_tests() -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    lines = subprocess.run(["make", "--no-print-directory", "-n", "test",
                            f"SYSTEM_PACKAGES={ABSENT}"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60, check=True).stdout
    assert ABSENT in lines and lines.index(ABSENT) < lines.index(".venv/bin/pytest")


def test_make_test_builds_the_weblate_venv_before_the_tests(tmp_path: Path) -> None:
    """On a fresh machine (no Weblate venv yet) `make test` builds it, from Debian's Python
    with the pinned packages, before pytest runs (tests/server/test_weblate_machinery.py)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    venv = tmp_path / "weblate-venv"
    lines = subprocess.run(["make", "--no-print-directory", "-n", "test", "SYSTEM_PACKAGES=dpkg",
                            f"WEBLATE_VENV={venv}"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60, check=True).stdout
    install = f"{venv}/bin/pip install -q --no-deps --ignore-installed -r " \
              "tests/weblate/requirements.txt"
    assert f"-m venv --system-site-packages {venv}" in lines
    assert install in lines and lines.index(install) < lines.index(".venv/bin/pytest")
    assert not venv.exists()  # -n: nothing was built
