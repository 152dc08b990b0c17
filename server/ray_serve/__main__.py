"""`python -m server.ray_serve [--replicas N] [--host H] [--port P] [--cpus-per-replica C]
[--object-store-mb M] [--store-dir DIR] [--registry-url URL] [--log-level L]`

Starts a local Ray cluster (or joins the one at RAY_ADDRESS), starts Serve's HTTP proxy on
H:P and runs N replicas of the server. Settings are the NMT_* environment and the flags, as
for `python -m server` (NMT_HOST / NMT_PORT give the proxy's defaults); every replica gets
them as its environment. SIGTERM or Ctrl-C
removes the application and stops everything this command started: the whole local cluster,
or, on a joined cluster, only the application and the Serve instance it started.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType

import ray
from ray import serve
from ray.serve.exceptions import RayServeException

import server
from launch.startup import add_store_flags, given, start
from server.ray_serve.deployment import application
from server.settings import Settings

log = logging.getLogger("server.ray_serve")
APP_NAME = "nmt"
# The package's parent directory: replicas import the same code as this command.
CODE_ROOT = Path(server.__file__).resolve().parents[1]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m server.ray_serve",
        description="Serve the translation API with N Ray Serve replicas behind Ray's proxy.")
    parser.add_argument("--replicas", type=int, default=1, help="number of replicas (1)")
    parser.add_argument("--host", help="proxy address (default NMT_HOST)")
    parser.add_argument("--port", type=int, help="proxy port (default NMT_PORT)")
    parser.add_argument("--cpus-per-replica", type=float, default=1.0,
                        help="CPUs Ray reserves per replica; also its torch threads (1)")
    parser.add_argument("--object-store-mb", type=int, default=128,
                        help="object store of a local cluster, MiB (128; the server "
                             "passes no large objects through it)")
    add_store_flags(parser)
    args = parser.parse_args(argv)
    if args.replicas < 1 or args.cpus_per_replica <= 0:
        parser.error("--replicas must be >= 1 and --cpus-per-replica > 0")
    return args


def replica_environment(settings: Settings, *, cpus_per_replica: float,
                        environ: Mapping[str, str]) -> dict[str, str]:
    """The process environment of every replica: this command's NMT_* variables and flags,
    the store as an absolute path (replicas do not share this command's working directory),
    this command's code on PYTHONPATH, and one torch thread per reserved CPU."""
    env = {key: value for key, value in environ.items() if key.startswith("NMT_")}
    env["NMT_STORE_DIR"] = str(settings.store_dir.resolve())
    env["NMT_LOG_LEVEL"] = settings.log_level
    if settings.registry_url is not None:
        env["NMT_REGISTRY_URL"] = settings.registry_url
    paths = [str(CODE_ROOT), *environ.get("PYTHONPATH", "").split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(part for part in paths if part))
    env["OMP_NUM_THREADS"] = str(max(1, int(cpus_per_replica)))
    return env


def proxy_address(args: argparse.Namespace, settings: Settings) -> tuple[str, int]:
    """Where Serve's proxy listens: the flags, else NMT_HOST / NMT_PORT, else 127.0.0.1:8000."""
    return args.host or settings.host, settings.port if args.port is None else args.port


def wait_for_stop_signal() -> None:
    """Block until SIGTERM or SIGINT (Ctrl-C)."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop.wait(1.0):
        pass


def serve_until_stopped(args: argparse.Namespace, settings: Settings) -> int:
    address = os.environ.get("RAY_ADDRESS") or None
    if address is None:  # "local": a new cluster, never one found on this machine
        ray.init(address="local", num_cpus=max(1, round(args.replicas * args.cpus_per_replica)),
                 object_store_memory=args.object_store_mb * 1024 * 1024,
                 include_dashboard=False)
    else:
        ray.init(address=address)
    started_serve = False
    try:
        started_serve = not _serve_running()
        host, port = proxy_address(args, settings)
        serve.start(http_options={"host": host, "port": port})
        env = replica_environment(settings, cpus_per_replica=args.cpus_per_replica,
                                  environ=os.environ)
        serve.run(application(replicas=args.replicas, cpus_per_replica=args.cpus_per_replica,
                              env=env), name=APP_NAME, route_prefix="/", blocking=False)
        log.info("serving %d replica(s) on http://%s:%d", args.replicas, host, port)
        wait_for_stop_signal()
    finally:
        _stop(local=address is None, started_serve=started_serve)
    return 0


def _serve_running() -> bool:
    try:
        serve.status()
    except RayServeException:  # no Serve controller on this cluster
        return False
    return True


def _stop(*, local: bool, started_serve: bool) -> None:
    try:
        if local or started_serve:
            serve.shutdown()  # type: ignore[no-untyped-call]
        else:
            serve.delete(APP_NAME)
    finally:
        ray.shutdown()  # a local cluster (its processes and replicas) goes with the driver


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return start(Settings, given(args, ("store_dir", "registry_url", "log_level")),
                 lambda settings: serve_until_stopped(args, settings))


if __name__ == "__main__":
    raise SystemExit(main())
