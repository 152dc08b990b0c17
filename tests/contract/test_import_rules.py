"""The import rules docs/ARCHITECTURE.md states ("Import direction"), checked on the source:
every `import` / `from ... import` of every module, read with `ast` (nothing is imported)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ("contract", "launch", "server", "model_store", "trainer", "converters", "benchmarks")


def imports_of(path: Path) -> set[str]:
    """Absolute module names `path` imports (relative imports stay inside its package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # `from server.serving import errors`
            found |= {f"{node.module}.{alias.name}" for alias in node.names
                      if (ROOT / node.module.replace(".", "/") / f"{alias.name}.py").exists()}
    return found


def modules_under(package: str) -> Iterator[tuple[str, set[str]]]:
    base = ROOT / package.replace(".", "/")
    paths = [base.with_suffix(".py")] if base.with_suffix(".py").exists() else \
        sorted(base.rglob("*.py"))
    for path in paths:
        yield str(path.relative_to(ROOT)), imports_of(path)


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def offenders(package: str, forbidden: tuple[str, ...], *,
              allowed: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Modules of `package` importing one of `forbidden` (packages or modules), except
    `allowed` and `package` itself."""
    out = {}
    for path, imported in modules_under(package):
        bad = sorted(m for m in imported
                     if any(within(m, f) for f in forbidden) and not within(m, package)
                     and not any(within(m, a) for a in allowed))
        if bad:
            out[path] = bad
    return out



@pytest.mark.parametrize(("package", "forbidden", "allowed"), [
    # contract imports nothing of ours; model_store only contract; launch only model_store
    ("contract", OURS, ()),
    ("model_store", OURS, ("contract",)),
    ("launch", OURS, ("model_store",)),
    # the server imports nothing from the processes and tools built on it
    ("server", ("trainer", "converters", "benchmarks"), ()),
    # the layers: api -> serving -> routing, scheduling -> engine -> decoding; the
    # outcomes (server/serving/errors.py) are every layer's
    ("server.decoding", ("server",), ()),
    ("server.engine", ("server",), ("server.decoding",)),
    ("server.scheduling", ("server.serving", "server.api", "server.routing"),
     ("server.serving.errors",)),
    ("server.routing", ("server.serving", "server.api", "server.scheduling", "server.engine"),
     ("server.serving.errors",)),
    ("server.serving.errors", OURS, ()),
    # the execution layout stands below every layer that runs on it
    ("server.execution", ("server",), ()),
    ("server.textproc", ("server",), ("server.serving.errors",)),
    # trainer and converters use the engine, decoding, routing features, the quality
    # estimator and the registry's refresh jobs, never the running server's parts
    ("trainer", ("server.api", "server.app", "server.scheduling", "server.execution",
                 "server.operations", "server.web", "server.documents"), ()),
    ("converters", ("server.api", "server.app", "server.scheduling", "server.execution",
                    "server.operations", "server.web", "server.documents", "server.serving",
                    "trainer"), ()),
])
def test_a_package_imports_only_what_the_architecture_allows(
        package: str, forbidden: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    assert offenders(package, forbidden, allowed=allowed) == {}


def test_only_the_app_imports_the_http_layer() -> None:
    users = {path for top in OURS for path, imported in modules_under(top)
             if not path.startswith("server/api/")
             and any(within(m, "server.api") for m in imported)}
    assert users == {"server/app.py"}


def test_text_processing_runs_without_torch() -> None:
    assert offenders("server.textproc", ("torch",)) == {}


def test_the_server_root_keeps_only_the_app_its_entry_point_and_settings() -> None:
    root = {path.name for path in (ROOT / "server").glob("*.py")}
    assert root == {"__init__.py", "__main__.py", "app.py", "settings.py"}


def test_every_server_package_is_in_the_architecture_layout() -> None:
    layout = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    packages = sorted(p.parent.name for p in (ROOT / "server").glob("*/__init__.py"))
    assert [p for p in packages if f"\n  {p}/" not in layout] == []


def test_every_package_is_named_in_the_architecture_layout() -> None:
    """Each package of ours (a folder with an `__init__.py`, tests aside) is named, as
    `name/`, in the layout block at the top of docs/ARCHITECTURE.md."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    layout = text.split("```", 2)[1]
    packages = {init.parent for top in OURS for init in (ROOT / top).rglob("__init__.py")}
    assert sorted(str(p.relative_to(ROOT)) for p in packages
                  if f"{p.name}/" not in layout) == []


def test_no_module_is_named_for_being_shared_rather_than_for_its_job() -> None:
    vague = {"util", "utils", "common", "misc", "helper", "helpers"}
    found = [str(path.relative_to(ROOT)) for top in (*OURS, "tests")
             for path in (ROOT / top).rglob("*.py")
             if path.stem in vague or path.stem.endswith(tuple(f"_{v}" for v in vague))]
    assert found == []


# trainer/'s packages in the order docs/ARCHITECTURE.md lists them: each imports only the
# packages named beside it, all listed before it, so no two of them depend on each other.
TRAINER_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("trainer.training", ()),
    ("trainer.routers", ()),
    ("trainer.quality", ("trainer.training",)),
    ("trainer.jobs", ("trainer.training", "trainer.routers", "trainer.quality")),
    ("trainer.corrections", ("trainer.training", "trainer.routers", "trainer.jobs")),
    ("trainer.sidecar", ("trainer.training", "trainer.jobs", "trainer.corrections")),
    ("trainer.recipes", ("trainer.training", "trainer.routers", "trainer.quality")),
    ("trainer.gpu", ("trainer.training", "trainer.recipes")),
]


@pytest.mark.parametrize(("package", "allowed"), TRAINER_LAYERS)
def test_a_trainer_package_imports_only_the_packages_below_it(
        package: str, allowed: tuple[str, ...]) -> None:
    assert offenders(package, ("trainer",), allowed=allowed) == {}


def test_every_trainer_module_is_in_a_package_but_the_entry_point() -> None:
    root = {path.name for path in (ROOT / "trainer").glob("*.py")}
    packages = {init.parent.name for init in (ROOT / "trainer").glob("*/__init__.py")}
    assert root == {"__init__.py", "__main__.py"}
    assert packages == {package.removeprefix("trainer.") for package, _ in TRAINER_LAYERS}
