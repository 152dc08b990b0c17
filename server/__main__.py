"""`nmt-server` (or `python -m server`) `[--host H] [--port P] [--store-dir DIR]
[--registry-url URL] [--backbone NAME] [--device D] [--int8] [--admin-port P] [--log-level L]`

Flags override the NMT_* environment (docs/API.md lists every setting); the admin token
is read from the environment only (NMT_ADMIN_TOKEN).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from launch.startup import add_store_flags, given, start
from server import listeners
from server.settings import Settings


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nmt-server",
                                     description="Serve the multi-domain translation API.")
    parser.add_argument("--host", help="address to listen on (NMT_HOST)")
    parser.add_argument("--port", type=int, help="port to listen on (NMT_PORT)")
    add_store_flags(parser)
    parser.add_argument("--backbone", help="backbone name to serve (NMT_BACKBONE)")
    parser.add_argument("--device", help="torch device: cpu, cuda, cuda:1 (NMT_ENGINE__DEVICE)")
    parser.add_argument("--int8", action="store_true", default=None,
                        help="int8 dynamic quantization on CPU (NMT_ENGINE__INT8)")
    parser.add_argument("--admin-port", type=int,
                        help="serve /admin on this port only (NMT_ADMIN_PORT)")
    return parser.parse_args(argv)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Only the flags that were given: the environment supplies the rest."""
    values = given(args, ("host", "port", "store_dir", "registry_url", "backbone", "log_level",
                          "admin_port"))
    engine = given(args, ("device", "int8"))
    if engine:
        values["engine"] = engine
    return values


def run(settings: Settings) -> int:
    listeners.run(settings)  # drains on SIGTERM (server/operations/lifecycle.py)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return start(Settings, overrides(parse_args(argv)), run)


if __name__ == "__main__":
    raise SystemExit(main())
