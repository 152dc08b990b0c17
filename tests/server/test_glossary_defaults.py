"""The domains' default glossaries live in memory and follow other replicas' writes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from model_store import Registry
from server.core.settings import LimitSettings
from server.serving.glossaries import GlossaryBook


def books(tmp_path: Path) -> tuple[Registry, GlossaryBook, GlossaryBook]:
    """One registry and two replicas' books over it."""
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    return registry, GlossaryBook(registry, LimitSettings()), GlossaryBook(registry,
                                                                           LimitSettings())


def test_a_replicas_own_writes_apply_at_once_and_others_after_a_reread(tmp_path: Path) -> None:
    registry, here, there = books(tmp_path)
    here.put("med", [("tablet", "comprimé")], default_for="medical", field="entries")
    assert here.domain_default("medical") is not None
    assert here.domain_default("law") is None
    assert there.domain_default("medical") is None  # not reread yet: memory only
    there.reload_defaults()
    default = there.domain_default("medical")
    assert default is not None and default.entries == (("tablet", "comprimé"),)
    here.delete("med")
    assert here.domain_default("medical") is None
    registry.close()


def test_the_background_reread_picks_up_another_replicas_default(tmp_path: Path) -> None:
    registry, here, there = books(tmp_path)

    async def scenario() -> bool:
        fresh = asyncio.create_task(there.keep_defaults_fresh(interval_s=0.01))
        try:
            here.put("law-terms", [("court", "tribunal")], default_for="law", field="entries")
            for _ in range(500):  # polls a condition: no assertion on time
                if there.domain_default("law") is not None:
                    return True
                await asyncio.sleep(0.01)
            return False
        finally:
            fresh.cancel()
            await asyncio.gather(fresh, return_exceptions=True)

    assert asyncio.run(scenario())
    registry.close()
