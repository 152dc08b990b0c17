"""The API layer's shape (docs/ARCHITECTURE.md, api/): request and response models live in
`schemas*.py`, every FastAPI dependency (a `Depends` provider and its `Annotated` alias) in
a `deps.py`, and a route module holds routes (and private helpers) only. And the
correction record is declared once (model_store/correction_rows.py): the table, the
registry's rows and the admin API's answer all follow it."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel
from pydantic.dataclasses import is_pydantic_dataclass

import server.api
from model_store.correction_rows import (
    RECORD_FIELDS,
    Correction,
    CorrectionRecord,
    NewCorrection,
)
from model_store.tables import corrections
from server.api.schemas_corrections import CorrectionInfo
from server.app import create_app

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "server" / "api"
PROVIDERS = ("Depends", "Security")
ROUTE_DECORATORS = {"get", "post", "put", "patch", "delete", "head", "options", "api_route"}


def api_modules() -> list[ModuleType]:
    names = [info.name for info in pkgutil.walk_packages(server.api.__path__, "server.api.")]
    return [importlib.import_module(name) for name in sorted(names)]


def misplaced_models(module: ModuleType) -> list[str]:
    """Pydantic models (BaseModel subclasses, pydantic dataclasses) a module outside
    `schemas*.py` declares."""
    if module.__name__.rpartition(".")[2].startswith("schemas"):
        return []
    return [f"{module.__name__}.{name}" for name, value in vars(module).items()
            if inspect.isclass(value) and value.__module__ == module.__name__
            and (issubclass(value, BaseModel) or is_pydantic_dataclass(value))]


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        return func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else None
    return None


def misplaced_dependencies(path: Path) -> list[str]:
    """Outside a `deps.py`: a `Depends(...)` whose provider is not imported from a deps
    module, and any `Annotated[..., Depends(...)]` (the aliases live in deps too)."""
    if path.name == "deps.py":
        return []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    from_deps = {alias.asname or alias.name for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module
                 and node.module.rpartition(".")[2] == "deps" for alias in node.names}
    found = []
    for node in ast.walk(tree):
        if _call_name(node) in PROVIDERS:
            assert isinstance(node, ast.Call)
            provider = node.args[0] if node.args else None
            if not (isinstance(provider, ast.Name) and provider.id in from_deps):
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith(
                "Annotated") and any(_call_name(n) in PROVIDERS for n in ast.walk(node)):
            found.append(f"{path.name}:{node.lineno} an alias {ast.unparse(node)}")
    return found


def non_routes(path: Path) -> list[str]:
    """In a module that makes an APIRouter: classes, and public functions that are not
    routes (decorated `@router.<method>` or registered with `router.add_api_route`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if not any(_call_name(node) == "APIRouter" for node in tree.body
               for node in ast.walk(node)):
        return []
    registered = {node.args[1].id for node in ast.walk(tree)
                  if _call_name(node) == "add_api_route" and isinstance(node, ast.Call)
                  and len(node.args) > 1 and isinstance(node.args[1], ast.Name)}
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            found.append(f"{path.name}: class {node.name}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            route = any(isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)
                        and d.func.attr in ROUTE_DECORATORS for d in node.decorator_list)
            if not (route or node.name.startswith("_") or node.name in registered):
                found.append(f"{path.name}: def {node.name}")
    return found


def test_request_and_response_models_live_in_schemas_modules() -> None:
    modules = api_modules()
    assert {m.__name__ for m in modules} >= {"server.api.schemas", "server.api.routes_keys",
                                             "server.api.libretranslate.routes"}
    assert [found for module in modules for found in misplaced_models(module)] == []


def test_dependencies_live_in_deps_modules() -> None:
    found = [where for path in sorted((ROOT / "server").rglob("*.py"))
             for where in misplaced_dependencies(path)]
    assert found == []


def test_route_modules_hold_routes() -> None:
    found = [where for path in sorted(API.rglob("*.py")) for where in non_routes(path)]
    assert found == []


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"server.api.{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_rules_catch_a_route_module_with_its_own_model_and_provider(
        tmp_path: Path) -> None:
    probe = tmp_path / "routes_probe.py"
    probe.write_text(
        "from typing import Annotated\n"
        "from fastapi import APIRouter, Depends, Request\n"
        "from pydantic import BaseModel\n"
        "from server.api.deps import require_admin\n"
        "router = APIRouter(dependencies=[Depends(require_admin)])\n"
        "class Answer(BaseModel):\n    ok: bool\n"
        "async def get_thing(request: Request) -> int:\n    return 1\n"
        "ThingDep = Annotated[int, Depends(get_thing)]\n"
        "@router.get('/probe')\nasync def probe(thing: ThingDep) -> Answer:\n"
        "    return Answer(ok=thing == 1)\n", encoding="utf-8")
    assert misplaced_models(_load(probe)) == ["server.api.routes_probe.Answer"]
    assert [w.split(" ", 1)[1] for w in misplaced_dependencies(probe)] == [
        "an alias Annotated[int, Depends(get_thing)]", "Depends(get_thing)"]
    assert non_routes(probe) == ["routes_probe.py: class Answer",
                                 "routes_probe.py: def get_thing"]


# ---- the correction record, declared once -------------------------------------------

def _names(kind: type) -> list[str]:
    return [f.name for f in dataclasses.fields(kind)]


def test_the_correction_record_extends_the_one_declaration() -> None:
    shared = _names(Correction)
    assert _names(CorrectionRecord)[:len(shared)] == shared == _names(NewCorrection)[:-1]
    assert list(RECORD_FIELDS) == _names(CorrectionRecord)
    # the table stores every field, and the fingerprint that makes a post-edit unique
    assert sorted(c.name for c in corrections.columns) == sorted(
        {*RECORD_FIELDS, *_names(NewCorrection)})


def test_the_admin_api_answers_the_record_as_it_is() -> None:
    assert issubclass(CorrectionInfo, CorrectionRecord)
    assert _names(CorrectionInfo) == list(RECORD_FIELDS)
    published: dict[str, Any] = create_app().openapi()["components"]["schemas"]
    assert list(published["CorrectionInfo"]["properties"]) == list(RECORD_FIELDS)
    assert published["CorrectionInfo"]["properties"]["used_in"]["description"] == (
        "the module version a refresh trained with it")  # the record's own words


# A second declaration of the record: a class with most of its fields (the record's own
# family aside). Request shapes (CorrectionRequest, Submission) and the short answer to
# POST /corrections name a few of them, not the record.
def redeclarations(path: Path) -> list[str]:
    family = {"Correction", "CorrectionRecord", "NewCorrection"}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and node.name not in family:
            own = {s.target.id for s in node.body
                   if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            if len(own & set(RECORD_FIELDS)) > len(RECORD_FIELDS) // 2:
                found.append(f"{path.parent.name}/{path.name}: {node.name}")
    return found


def test_no_package_declares_the_correction_record_again(tmp_path: Path) -> None:
    found = [where for package in ("server", "model_store", "trainer", "contract")
             for path in sorted((ROOT / package).rglob("*.py"))
             for where in redeclarations(path)]
    assert found == []
    copy = tmp_path / "copy.py"  # the admin API's own list of the fields, as it was
    copy.write_text("class CorrectionView:\n" + "".join(
        f"    {name}: str\n" for name in RECORD_FIELDS), encoding="utf-8")
    assert [w.split(": ")[1] for w in redeclarations(copy)] == ["CorrectionView"]
