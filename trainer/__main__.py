"""`nmt-trainer` (or `python -m trainer`) `[--once] [--store-dir DIR] [--registry-url URL]
[--worker-name NAME] [--log-level L]`: the training sidecar.

It shares the model store (`NMT_STORE_DIR`, `NMT_REGISTRY_URL`) with the server, takes
training jobs created by `POST /admin/domains` from the registry, trains and gates each
domain's module, retrains the router and publishes both; the server's registry poller
serves them without a restart. Flags override the NMT_* environment (docs/API.md).
SIGTERM / SIGINT stop it gracefully: the running job checkpoints and is queued again.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

import torch

from launch.startup import add_store_flags, given, start
from trainer.jobs.settings import SidecarSettings
from trainer.sidecar.priority import lower_priority
from trainer.sidecar.worker import Sidecar
from trainer.training.loop import stop_on_signals

log = logging.getLogger("trainer")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nmt-trainer",
                                     description="Train domain modules queued by the server.")
    parser.add_argument("--once", action="store_true",
                        help="process at most one job (resumed or queued), then exit")
    add_store_flags(parser)
    parser.add_argument("--worker-name", help="this worker's name (NMT_TRAINER__WORKER_NAME)")
    return parser.parse_args(argv)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Only the flags that were given: the environment supplies the rest."""
    values = given(args, ("store_dir", "registry_url", "log_level"))
    if args.worker_name is not None:
        values["trainer"] = {"worker_name": args.worker_name}
    return values


def run_sidecar(settings: SidecarSettings, *, once: bool) -> int:
    lower_priority(settings.trainer.niceness)
    threads = settings.torch_threads()
    if threads:  # 0: torch's default
        torch.set_num_threads(threads)
    stop = stop_on_signals()
    with settings.open_store() as store:
        log.info("sidecar %s on %s, %d torch thread(s)", settings.trainer.worker_name,
                 settings.store_dir, torch.get_num_threads())
        processed = Sidecar(store, settings.trainer, stop=stop).run(once=once)
    log.info("sidecar stopped after %d job(s)", processed)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return start(SidecarSettings, overrides(args),
                 lambda settings: run_sidecar(settings, once=args.once))


if __name__ == "__main__":
    raise SystemExit(main())
