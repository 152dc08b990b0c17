"""The line at the top of every results file that says how it was made: the command that
wrote it, the host (the CPU, and the GPU when one ran it) and the date. A number is only
read beside where it came from (docs/BENCHMARKS.md)."""

from __future__ import annotations

import re
import shlex
import sys
from datetime import UTC, datetime

MADE_BY = re.compile(r"^Made by `(?P<command>[^`]+)` on (?P<host>.+), "
                     r"(?P<date>\d{4}-\d{2}-\d{2})\.$")


def command_line() -> str:
    """This process's command, as `python -m benchmarks....` and its arguments."""
    return shlex.join(["python", *sys.orig_argv[1:]])


def host_label() -> str:
    """"AMD EPYC (AVX-512, VNNI, BF16; 2 CPUs)", or the GPU's name first when CUDA runs."""
    import torch

    from benchmarks.host import current_host

    cpu = current_host().label
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name()} GPU, host {cpu}"
    return cpu


def made_by(*, command: str | None = None, host: str | None = None,
            when: datetime | None = None) -> str:
    line = (f"Made by `{command or command_line()}` on {host or host_label()}, "
            f"{(when or datetime.now(UTC)).date().isoformat()}.")
    assert MADE_BY.match(line), line
    return line


def stamped(text: str, line: str | None = None) -> str:
    """`text` with the made-by line: under a markdown title, else first."""
    line = line or made_by()
    title, _, rest = text.partition("\n")
    if title.startswith("# "):
        return f"{title}\n\n{line}\n\n{rest.lstrip(chr(10))}"
    return f"{line}\n\n{text}"
