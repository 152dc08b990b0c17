"""The server's runtime packages that a lent GPU host lacks, for its Python (3.12, x86_64),
packed into `.whl/site.tar.xz` (git-ignored) so a device call can carry them:

    python -m benchmarks.speed.gpu.gpu_wheels            # then carry [".whl"] in the run call

The GPU image has torch and many common packages (the device tool's KINDS.md lists them):
those are used as they are. pip resolves the exact pins of pyproject.toml for that Python
and platform and downloads the missing ones; their contents are unpacked, stripped of
debug symbols and of pycountry's translations (the server reads English names only) and
packed with xz: about 11 MiB instead of 29 MiB of wheels, of the 64 MiB a call may send.
benchmarks/speed/gpu/gpu_serve_run.sh unpacks it into /tmp/site.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.locations import REPO

PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64",
             "manylinux1_x86_64")
# On the GPU image already (KINDS.md, 2026-11-17), or not needed there (PostgreSQL's driver:
# the GPU run keeps its registry in SQLite).
PRESENT = frozenset({
    "torch", "numpy", "safetensors", "sentencepiece", "httpx", "httpcore", "h11", "anyio",
    "idna", "certifi", "click", "prometheus-client", "sacrebleu", "lxml", "markdown-it-py",
    "mdurl", "uvloop", "typing-extensions", "regex", "tabulate", "portalocker", "colorama",
    "requests", "urllib3", "charset-normalizer", "tqdm", "pyyaml", "markupsafe", "aiohttp",
    "aiosignal", "frozenlist", "multidict", "yarl", "propcache", "attrs", "sniffio",
    "psycopg", "psycopg-binary"})
# Clients the serve run's benchmarks drive the server with, beside the runtime: the bulk
# part's LibreTranslate client (pinned in pyproject.toml's dev extras).
BENCH_CLIENTS = ("libretranslatepy",)


def normalise(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def runtime_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """The exact pins of the server's runtime dependencies and of the benchmarks' clients,
    less what the image has."""
    project = tomllib.loads(pyproject.read_text())["project"]
    clients = [d for d in project["optional-dependencies"]["dev"]
               if normalise(d.split("==")[0]) in BENCH_CLIENTS]
    pins = [d.split(";")[0].strip() for d in [*project["dependencies"], *clients]]
    return [p for p in pins if normalise(p.split("==")[0]) not in PRESENT]


def platform_flags() -> list[str]:
    flags = ["--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp"]
    for tag in PLATFORMS:
        flags += ["--platform", tag]
    return flags


def resolve(requirements: Sequence[str]) -> list[str]:
    """name==version of everything those requirements install on the GPU host's Python,
    less what the image has."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run",
                        "--ignore-installed", "--target", str(Path(scratch) / "target"),
                        "--report", str(report), *platform_flags(), *requirements],
                       check=True)
        installs = json.loads(report.read_text())["install"]
    pins = [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in installs]
    return sorted(p for p in pins if normalise(p.split("==")[0]) not in PRESENT)


def pack_site(wheels: Sequence[Path], out: Path) -> Path:
    """The wheels' files as one xz tar (to unpack into a folder on PYTHONPATH)."""
    with tempfile.TemporaryDirectory() as scratch:
        site = Path(scratch)
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(site)
        shutil.rmtree(site / "pycountry" / "locales", ignore_errors=True)
        libraries = [str(p) for p in site.rglob("*.so")]
        if libraries and shutil.which("strip"):
            subprocess.run(["strip", "--strip-unneeded", *libraries], check=True)
        with tarfile.open(out, "w:xz", preset=6) as tar:
            for path in sorted(site.iterdir()):
                tar.add(path, arcname=path.name)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / ".whl")
    parser.add_argument("--list", action="store_true", help="print the pins, download nothing")
    args = parser.parse_args(argv)
    pins = resolve(runtime_requirements())
    if args.list:
        print("\n".join(pins))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--dest", str(args.out), *platform_flags(), *pins], check=True)
    packed = pack_site(sorted(args.out.glob("*.whl")), args.out / "site.tar.xz")
    for wheel in args.out.glob("*.whl"):
        wheel.unlink()
    print(f"{len(pins)} packages in {packed}: {packed.stat().st_size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
