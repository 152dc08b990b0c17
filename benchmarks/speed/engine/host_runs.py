"""`engine_speed.md` keeps one run per host kind and mode (issue #51): the engine's lead
over CTranslate2 differs several-fold between CPU generations, so a run on an Intel Xeon
with AMX must not erase the AMD EPYC one (nor a quick run a full one). Each run is a
top-level section (`# ...`) whose made-by line names its host; a new run replaces the
section of the same host kind and mode, and is added after the others otherwise.

A host kind is the host's label without its CPU count ("AMD EPYC (AVX-512, VNNI, BF16)"):
the same CPU model and features on another instance size is the same kind.
"""

from __future__ import annotations

import re

from benchmarks.provenance import MADE_BY

_CPU_COUNT = re.compile(r"(?:, |\()\d+ CPUs\)")
_MODE = re.compile(r"\((?P<mode>\w+) run\)\s*$")


def host_kind(label: str) -> str:
    """'AMD EPYC (AVX-512, VNNI, BF16, 2 CPUs)' -> 'AMD EPYC (AVX-512, VNNI, BF16)'; a GPU
    run's label ('H100 GPU, host ...') is kept whole."""
    return _CPU_COUNT.sub(lambda m: ")" if m.group(0).startswith(",") else "", label).strip()


def sections(text: str) -> list[str]:
    """The top-level sections of a results file, each from its '# ' title on."""
    found: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("# ") or not found:
            found.append([])
        found[-1].append(line)
    return ["\n".join(lines).strip("\n") for lines in found if any(s.strip() for s in lines)]


def section_key(section: str) -> tuple[str, str] | None:
    """(host kind, mode) of a section: its made-by line's host, its title's mode."""
    lines = section.splitlines()
    mode = _MODE.search(lines[0]) if lines else None
    for line in lines[1:6]:
        made = MADE_BY.match(line.strip())
        if made:
            return host_kind(made["host"]), mode["mode"] if mode else "full"
    return None


def merge(existing: str, new_section: str) -> str:
    """`existing` with `new_section` in place of the section of the same host kind and
    mode (or after the others); sections of other hosts and modes keep their text."""
    key = section_key(new_section)
    kept, placed = [], False
    for section in sections(existing):
        if key is not None and section_key(section) == key:
            if not placed:
                kept.append(new_section.strip("\n"))
                placed = True
            continue
        kept.append(section)
    if not placed:
        kept.append(new_section.strip("\n"))
    return "\n\n".join(kept) + "\n"
