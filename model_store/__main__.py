"""`python -m model_store upgrade-registry URL`, `python -m model_store copy-registry
SOURCE TARGET` and `python -m model_store reshard STORE`: registry and store maintenance for
operators (docs/REGISTRY.md).

Servers and trainers upgrade the registry's schema themselves when they start; running
`upgrade-registry` first (e.g. as a Kubernetes Job before a rollout) only moves that work
out of their start-up.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from .errors import StoreError
from .registry import Registry
from .schema import current_revision
from .store import Store
from .transfer import copy_registry


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m model_store",
                                     description="Registry maintenance.")
    commands = parser.add_subparsers(dest="command", required=True)
    upgrade = commands.add_parser("upgrade-registry",
                                  help="create or upgrade the registry schema, print its revision")
    upgrade.add_argument("url", help="registry URL (sqlite:///PATH or postgresql+psycopg://...)")
    copy = commands.add_parser("copy-registry",
                               help="copy every row of a registry into a new, empty one")
    copy.add_argument("source", help="registry URL to copy from (e.g. the store's SQLite file)")
    copy.add_argument("target", help="empty registry URL to copy into (e.g. PostgreSQL)")
    reshard = commands.add_parser(
        "reshard", help="move a store's modules to the sharded layout (cheap listings at "
                        "thousands of modules; model_store/layout.py)")
    reshard.add_argument("store", help="the store's root directory")
    reshard.add_argument("--registry-url", default=None,
                         help="its registry (default: the SQLite file in the store)")
    return parser.parse_args(argv)


def _safe(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "upgrade-registry":
            registry = Registry(args.url)
            with registry.engine.connect() as conn:
                print(f"{_safe(args.url)}: schema revision {current_revision(conn)}")
            registry.close()
        elif args.command == "reshard":
            with Store.open(Path(args.store), registry_url=args.registry_url,
                            builtin_dir=None) as store:
                moved = store.reshard()
            print(f"{args.store}: sharded layout, {len(moved)} module directories moved")
        else:
            copied = copy_registry(args.source, args.target)
            rows = ", ".join(f"{count} {table}" for table, count in copied.items())
            print(f"copied {_safe(args.source)} -> {_safe(args.target)}: {rows}")
    except (StoreError, SQLAlchemyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
