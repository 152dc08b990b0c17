"""`python -m server [--host H] [--port P] [--store-dir DIR] [--registry-url URL]
[--backbone NAME] [--device D] [--int8] [--admin-port P] [--log-level L]`

Flags override the NMT_* environment (docs/API.md lists every setting); the admin token
is read from the environment only (NMT_ADMIN_TOKEN).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from server import listeners
from server.settings import Settings


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m server",
                                     description="Serve the multi-domain translation API.")
    parser.add_argument("--host", help="address to listen on (NMT_HOST)")
    parser.add_argument("--port", type=int, help="port to listen on (NMT_PORT)")
    parser.add_argument("--store-dir", type=Path, help="model store root (NMT_STORE_DIR)")
    parser.add_argument("--registry-url", help="registry database URL (NMT_REGISTRY_URL)")
    parser.add_argument("--backbone", help="backbone name to serve (NMT_BACKBONE)")
    parser.add_argument("--device", help="torch device: cpu, cuda, cuda:1 (NMT_ENGINE__DEVICE)")
    parser.add_argument("--int8", action="store_true", default=None,
                        help="int8 dynamic quantization on CPU (NMT_ENGINE__INT8)")
    parser.add_argument("--admin-port", type=int,
                        help="serve /admin on this port only (NMT_ADMIN_PORT)")
    parser.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"],
                        help="logging level (NMT_LOG_LEVEL)")
    return parser.parse_args(argv)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Only the flags that were given: the environment supplies the rest."""
    values: dict[str, Any] = {key: getattr(args, key) for key in (
        "host", "port", "store_dir", "registry_url", "backbone", "log_level", "admin_port")
        if getattr(args, key) is not None}
    engine = {key: getattr(args, key) for key in ("device", "int8")
              if getattr(args, key) is not None}
    if engine:
        values["engine"] = engine
    return values


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        settings = Settings(**overrides(args))
    except ValidationError as error:
        print(f"invalid settings:\n{error}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    listeners.run(settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
