"""`python -m trainer [--once] [--store-dir DIR] [--registry-url URL] [--worker-name NAME]
[--log-level L]`: the training sidecar.

It shares the model store (`NMT_STORE_DIR`, `NMT_REGISTRY_URL`) with the server, takes
training jobs created by `POST /admin/domains` from the registry, trains and gates each
domain's module, retrains the router and publishes both; the server's registry poller
serves them without a restart. Flags override the NMT_* environment (docs/API.md).
SIGTERM / SIGINT stop it gracefully: the running job checkpoints and is queued again.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from model_store import BUILTIN_DIR, Store
from trainer.loop import stop_on_signals
from trainer.settings import SidecarSettings
from trainer.sidecar import Sidecar

log = logging.getLogger("trainer")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m trainer",
                                     description="Train domain modules queued by the server.")
    parser.add_argument("--once", action="store_true",
                        help="process at most one job (resumed or queued), then exit")
    parser.add_argument("--store-dir", type=Path, help="model store root (NMT_STORE_DIR)")
    parser.add_argument("--registry-url", help="registry database URL (NMT_REGISTRY_URL)")
    parser.add_argument("--worker-name", help="this worker's name (NMT_TRAINER__WORKER_NAME)")
    parser.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"],
                        help="logging level (NMT_LOG_LEVEL)")
    return parser.parse_args(argv)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Only the flags that were given: the environment supplies the rest."""
    values: dict[str, Any] = {key: getattr(args, key) for key in (
        "store_dir", "registry_url", "log_level") if getattr(args, key) is not None}
    if args.worker_name is not None:
        values["trainer"] = {"worker_name": args.worker_name}
    return values


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        settings = SidecarSettings(**overrides(args))
    except ValidationError as error:
        print(f"invalid settings:\n{error}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if settings.trainer.threads:
        torch.set_num_threads(settings.trainer.threads)
    stop = stop_on_signals()
    builtin = BUILTIN_DIR if settings.builtin_artifacts else None
    with Store.open(settings.store_dir, registry_url=settings.registry_url,
                    builtin_dir=builtin) as store:
        log.info("sidecar %s on %s", settings.trainer.worker_name, settings.store_dir)
        processed = Sidecar(store, settings.trainer, stop=stop).run(once=args.once)
    log.info("sidecar stopped after %d job(s)", processed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
