"""Which module versions in-flight requests use, and which versions wait to be removed.

Requests `hold()` the module ids of the state they were routed with and `release()` them
when done. A version that left the served state is *retired*: it stays in the engine until
no request holds it, then the runtime removes it. Old and new versions therefore coexist
while in-flight work finishes; each request ends on the version it started with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from server.serving.state import ModuleRef


class ModuleHolds:
    def __init__(self) -> None:
        self._refs: Counter[str] = Counter()
        self._retired: set[str] = set()

    def replace(self, old_ids: set[str], new_ids: set[str]) -> None:
        """The served versions changed from `old_ids` to `new_ids`: retire what left,
        un-retire what came back."""
        self._retired = (self._retired | (old_ids - new_ids)) - new_ids

    def hold(self, module_ids: Iterable[str], *, served: set[str]) -> bool:
        """Count in-flight use; False (nothing counted) when one of the ids is neither
        served nor retired any more."""
        ids = list(module_ids)
        live = served | self._retired
        if any(m not in live for m in ids):
            return False
        self._refs.update(ids)
        return True

    def release(self, module_ids: Iterable[str]) -> bool:
        """Uncount; True when a retired version is now held by nobody."""
        self._refs.subtract(module_ids)
        self._refs = +self._refs  # drop zero counts
        return any(m not in self._refs for m in self._retired)

    def take_idle(self) -> list[str]:
        """The retired versions no request holds, forgotten here (the caller removes them)."""
        idle = [m for m in self._retired if not self._refs[m]]
        self._retired.difference_update(idle)
        return idle

    def in_flight(self, domain: str) -> list[str]:
        """The held module ids of `domain`'s versions."""
        return [m for m, count in self._refs.items()
                if count and ModuleRef.parse(m).domain == domain]
