"""The one start-up path of every process: flags over the environment, settings validated
once (a message and exit status 2 when invalid), logging configured, then the process.

Flags override only what they set: the environment supplies the rest.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from launch.settings import LOG_LEVELS, ProcessSettings

S = TypeVar("S", bound=ProcessSettings)
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def add_store_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of the shared settings (`ProcessSettings`)."""
    parser.add_argument("--store-dir", type=Path, help="model store root (NMT_STORE_DIR)")
    parser.add_argument("--registry-url", help="registry database URL (NMT_REGISTRY_URL)")
    parser.add_argument("--log-level", choices=LOG_LEVELS, help="logging level (NMT_LOG_LEVEL)")


def given(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The flags among `names` that were given (not None), by settings field name."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def start(settings_type: type[S], overrides: dict[str, Any], run: Callable[[S], int]) -> int:
    """Build the settings (environment + `overrides`), configure logging, run; the exit
    status of the process."""
    try:
        settings = settings_type(**overrides)
    except ValidationError as error:
        sys.stderr.write(f"invalid settings:\n{error}\n")
        return 2
    logging.basicConfig(level=settings.log_level.upper(), format=LOG_FORMAT)
    return run(settings)
