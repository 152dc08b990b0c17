"""Moving a registry to another database (SQLite -> PostgreSQL): every row, one transaction,
the event counter going on after the copied events; `python -m model_store`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_store_schema import BEFORE_MIGRATIONS

from model_store import ConflictError, Registry
from model_store.__main__ import main
from model_store.transfer import copy_registry


@pytest.fixture
def old_sqlite(tmp_path: Path) -> str:
    """A registry made before migrations: the oldest thing an operator may move."""
    path = tmp_path / "old.sqlite"
    shutil.copy(BEFORE_MIGRATIONS, path)
    return f"sqlite:///{path}"


def rows(registry: Registry) -> tuple[object, ...]:
    return (registry.list_artifacts(), registry.active_versions("module"),
            registry.active_versions("backbone"), registry.list_jobs(),
            registry.events_since(0))


def test_copy_moves_every_row_and_the_counter_goes_on(old_sqlite: str,
                                                      registry_url: str) -> None:
    copied = copy_registry(old_sqlite, registry_url)

    source, target = Registry(old_sqlite), Registry(registry_url)
    try:
        assert copied == {"active": 2, "api_keys": 0, "artifacts": 4, "events": 9, "jobs": 2,
                          "glossaries": 0, "corrections": 0, "memories": 0, "memory_pairs": 0,
                          "memory_changes": 0, "memory_imports": 0, "memory_gates": 0,
                          "tenants": 0, "tenant_keys": 0, "tenant_resources": 0,
                          "tenant_resource_changes": 0}
        assert rows(target) == rows(source)
        target.set_active("module", "law", 1)
        assert target.latest_event_id() == 10
        assert target.claim_next_job("w").id == "job-queued"  # type: ignore[union-attr]
    finally:
        source.close()
        target.close()


def test_copy_into_a_registry_in_use_is_refused_and_changes_nothing(
        old_sqlite: str, registry_url: str) -> None:
    used = Registry(registry_url)
    job = used.create_job("mine", config={}, data_location="x")

    with pytest.raises(ConflictError, match=r"not empty \(rows in: jobs\)"):
        copy_registry(old_sqlite, registry_url)

    assert used.list_jobs() == [job] and used.list_artifacts() == []
    used.close()


def test_command_line_upgrades_and_copies(old_sqlite: str, registry_url: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["upgrade-registry", old_sqlite]) == 0
    assert "schema revision" in capsys.readouterr().out
    assert main(["copy-registry", old_sqlite, registry_url]) == 0
    assert "4 artifacts" in capsys.readouterr().out
    assert main(["copy-registry", old_sqlite, registry_url]) == 1  # not empty any more
    assert "not empty" in capsys.readouterr().err
