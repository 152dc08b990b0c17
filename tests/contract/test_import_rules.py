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
            # `from server.core import errors`
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



# The server's floors, lowest first (docs/ARCHITECTURE.md, "Floors"): a package imports
# only packages on a lower floor, never one on its own floor or above it. server.core holds
# what every floor shares (error types, metric handles, settings sections).
FLOORS: dict[str, int] = {
    "server.core": 0,
    "server.decoding": 1, "server.execution": 1, "server.textproc": 1,
    "server.engine": 2, "server.settings": 2,
    "server.quality": 3, "server.routing": 3, "server.scheduling": 3, "server.memories": 3,
    "server.serving": 4,
    "server.access": 5, "server.operations": 5,
    "server.corrections": 6, "server.documents": 6,
    "server.api": 7, "server.web": 7,
    "server.app": 8,
    "server.__main__": 9, "server.ray_serve": 9,
}


def floor_package(module: str) -> str | None:
    """The floor-map entry a `server.*` module belongs to (None: not a server module)."""
    parts = module.split(".")
    if parts[0] != "server" or len(parts) < 2:
        return None
    return ".".join(parts[:2])


def climbing_imports() -> dict[str, list[str]]:
    """Each server module's imports of a package on its own floor or above (its own
    package aside)."""
    out: dict[str, list[str]] = {}
    for path, imported in modules_under("server"):
        own = floor_package(".".join(Path(path).with_suffix("").parts))
        if own is None or own not in FLOORS:
            continue
        bad = sorted(m for m in imported
                     if (target := floor_package(m)) is not None and target != own
                     and target in FLOORS and FLOORS[target] >= FLOORS[own])
        if bad:
            out[path] = bad
    return out


def test_every_server_package_has_a_floor() -> None:
    packages = {f"server.{p.parent.name}" for p in (ROOT / "server").glob("*/__init__.py")}
    modules = {f"server.{p.stem}" for p in (ROOT / "server").glob("*.py")
               if p.stem != "__init__"}
    assert sorted((packages | modules) - set(FLOORS)) == []


def test_no_server_module_imports_from_its_own_floor_or_above() -> None:
    assert climbing_imports() == {}


def test_the_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The check reads real files: an engine module importing the serving layer is found."""
    module = tmp_path / "climb.py"
    module.write_text("from server.serving.translation import Translator\n"
                      "from server.core import errors\n", encoding="utf-8")
    imported = imports_of(module)
    own = "server.engine"
    assert sorted(m for m in imported if (t := floor_package(m)) and t != own
                  and FLOORS[t] >= FLOORS[own]) == ["server.serving.translation"]


@pytest.mark.parametrize("lower", ["server.engine", "server.decoding", "server.scheduling",
                                   "server.routing", "server.textproc", "server.quality",
                                   "server.execution"])
@pytest.mark.parametrize("upper", ["server.serving", "server.api", "server.documents",
                                   "server.corrections"])
def test_the_core_floors_never_import_the_request_layers(lower: str, upper: str) -> None:
    assert FLOORS[lower] < FLOORS[upper]
    assert offenders(lower, (upper,)) == {}


def module_graph() -> dict[str, set[str]]:
    """Every module of ours -> the modules of ours it imports (relative imports resolved,
    `from package import module` counted as the module)."""
    files: dict[str, Path] = {}
    for top in OURS:
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = name.split(".") if path.name == "__init__.py" \
                        else name.split(".")[:-1]
                    package = package[:len(package) - node.level + 1]
                    base = ".".join([*package, *([node.module] if node.module else [])])
                for alias in node.names:
                    if f"{base}.{alias.name}" in files:
                        targets.add(f"{base}.{alias.name}")
                    elif base in files:
                        targets.add(base)
        graph[name] = targets - {name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def test_no_import_cycle_anywhere_in_the_repository() -> None:
    assert import_cycles(module_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize(("package", "forbidden", "allowed"), [
    # contract imports nothing of ours; model_store only contract; launch only model_store
    ("contract", OURS, ()),
    ("model_store", OURS, ("contract",)),
    ("launch", OURS, ("model_store",)),
    # the server imports nothing from the processes and tools built on it
    ("server", ("trainer", "converters", "benchmarks"), ()),
    ("server.core", OURS, ()),
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
    """The settings tree composes the sections of server/core/settings.py."""
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
