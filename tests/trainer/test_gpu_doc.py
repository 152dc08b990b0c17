"""docs/GPU.md's commands stay runnable: every `python -m trainer.gpu.<module>` line (and the
serve run's `gpu_wheels`) parses with that module's own argument parser (stopped right after
parsing: nothing is packed or trained), every `make` target, script and test file it names
exists. And the page is
for the people who run it: no notes on how the work was organised."""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
from pathlib import Path
from typing import Any, NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "GPU.md"
PREFIXES = {"nice", "timeout"}  # wrappers before the command, with their own arguments


class Parsed(Exception):
    """Not an error: how a parse reports that it succeeded, before `main` goes on."""

    def __init__(self, namespace: argparse.Namespace) -> None:
        super().__init__("parsed")
        self.namespace = namespace


def page_commands() -> list[list[str]]:
    """Each command of the page's sh blocks as words, continuation lines joined, `&&`
    chains split, variable assignments and wrappers (`nice -n 19`, `timeout 120`) dropped."""
    blocks = re.findall(r"```sh\n(.*?)```", PAGE.read_text(), re.DOTALL)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                while words and re.match(r"^[A-Z_]+=", words[0]):
                    words.pop(0)
                while words and words[0] in PREFIXES:
                    words = words[3:] if words[0] == "nice" else words[2:]
                if words:
                    commands.append(words)
    return commands


def module_commands() -> list[list[str]]:
    return [words for words in page_commands()
            if Path(words[0]).name.startswith("python") and words[1] == "-m"]


def test_the_page_shows_every_step() -> None:
    modules = {words[2] for words in module_commands()}
    assert modules == {"trainer.gpu.repository_budget", "trainer.gpu.pack", "trainer.gpu.run",
                       "trainer.gpu.restore", "benchmarks.speed.gpu.gpu_wheels"}


@pytest.mark.parametrize("words", module_commands(), ids=lambda w: " ".join(w[2:4]))
def test_each_module_command_parses(words: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        raise Parsed(parse(self, *args, **kwargs))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    module = importlib.import_module(words[2])
    with pytest.raises(Parsed) as parsed:
        module.main(words[3:])  # an unknown option or a bad value exits 2 instead
    if "--shape" in words:
        assert parsed.value.namespace.shape == words[words.index("--shape") + 1]


def test_the_run_is_a_smoke_test_then_the_real_run() -> None:
    runs = [words for words in module_commands() if words[2] == "trainer.gpu.run"]
    assert [("--tiny" in words) for words in runs] == [True, False]
    real = runs[1]
    assert float(real[real.index("--minutes") + 1]) < 10  # the page's promise


def test_make_targets_and_test_files_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    commands = page_commands()
    targets = [w[1] for w in commands if w[0] == "make"]
    assert targets and all(re.search(rf"^{t}:", makefile, re.MULTILINE) for t in targets)
    tests = [w for words in commands if words[0].endswith("pytest") for w in words[1:]
             if w.endswith(".py")]
    assert tests and all((ROOT / t).is_file() for t in tests)
    scripts = [words[1] for words in commands if words[0] == "bash"]
    assert scripts and all((ROOT / s).is_file() for s in scripts)


def test_the_page_tells_no_history() -> None:
    text = PAGE.read_text()
    assert not re.search(r"(?<![\w/&])#\d+\b", text), "an issue number"
    assert not re.search(r"\b(session|issue|lease|lent|helper)s?\b|device time", text,
                         re.IGNORECASE)
