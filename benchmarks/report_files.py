"""Every benchmark's results written one way: `<name>.json` (the numbers, as the benchmark
computed them), `<name>.meta.json` where a run's set-up is kept apart, and `<name>.md` (what
a reader reads) under the made-by line (provenance.py), side by side in one folder.

The JSON is UTF-8 (texts stay readable), indented, keys in the benchmark's order (a meta
file's sorted), and ends with a newline. Plain-text reports (profiles) get the made-by line
too (`write_stamped`). Every benchmark writes its results through this module.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.locations import RESULTS_DIR
from benchmarks.provenance import stamped


def results_dir(out: Path | None, *, tiny: bool = False) -> Path:
    """`out`, else results/ (`tiny`: results/tmp/, git-ignored: a toy run's numbers never
    replace a real one's)."""
    return out or (RESULTS_DIR / "tmp" if tiny else RESULTS_DIR)


def json_text(data: Any, *, sort_keys: bool = False) -> str:
    # a value JSON has no type for (a path, a date) is written as its text: a long run's
    # numbers are never lost to one field at the end
    return json.dumps(data, indent=1, ensure_ascii=False, sort_keys=sort_keys,
                      default=str) + "\n"


def write_report(folder: Path, name: str, data: Any, markdown: str, *,
                 meta: Mapping[str, Any] | None = None, made_by: str | None = None,
                 merge: Callable[[str, str], str] | None = None) -> list[Path]:
    """`<name>.json` (`data`), `<name>.meta.json` (`meta`, when given) and `<name>.md`
    (`markdown` stamped with `made_by`, by default this process's command, host and date)
    in `folder`; returns their paths, the markdown's last.

    `merge(earlier, new)` joins the stamped report with the file's earlier text (the engine
    speed report keeps one run per host kind); without it a new report replaces the old."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.json"]
    paths[0].write_text(json_text(data), encoding="utf-8")
    if meta is not None:
        paths.append(folder / f"{name}.meta.json")
        paths[-1].write_text(json_text(dict(meta), sort_keys=True), encoding="utf-8")
    paths.append(folder / f"{name}.md")
    text = stamped(markdown, made_by)
    if merge is not None:
        earlier = paths[-1].read_text(encoding="utf-8") if paths[-1].exists() else ""
        text = merge(earlier, text)
    paths[-1].write_text(text, encoding="utf-8")
    return paths


def write_stamped(path: Path, text: str, *, made_by: str | None = None) -> Path:
    """A plain-text or markdown report on its own (a profile), with the made-by line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(stamped(text, made_by), encoding="utf-8")
    return path
