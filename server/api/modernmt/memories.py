"""ModernMT's memories over ours: a ModernMT memory id is our memory's integer id (stable,
unique across directions); a memory lives in the direction of its languages (created in
the default direction unless `source`/`target` name another). ModernMT memories also
hold glossaries (Weblate uploads its project's glossary as a CSV), of any languages: a
memory's glossary of a language pair is stored as our glossary `modernmt-memory-<id>.<pair>`
(`modernmt-memory-3.en-de`), used when a translation of that pair names the memory in
`glossaries`. (Weblate creates its glossary memories by name alone, so they live in the
default direction while their glossaries are of its project's languages.)"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from model_store import MemoryRecord, Registry
from server.api.modernmt.errors import ModernMTError, bad_request, not_found
from server.core.errors import Forbidden, NotFound
from server.core.tenancy import current_scope
from server.memories.admin import MemoryAdmin
from server.memories.imports import MemoryImports
from server.serving.directions import Direction, Directions
from server.textproc.languages import LanguagePair

GLOSSARY_PREFIX = "modernmt-memory-"
MAX_CSV_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True)
class Found:
    direction: Direction
    admin: MemoryAdmin
    record: MemoryRecord


def glossary_name(memory_id: int, pair: LanguagePair) -> str:
    """The stored glossary of memory `memory_id` for `pair`."""
    return f"{GLOSSARY_PREFIX}{memory_id}.{pair.source}-{pair.target}"


def pair_of(direction: Direction, found: Found) -> LanguagePair | None:
    """The languages of `direction` as the memory `found` sees them: a direction that
    does not name its pair has the memory's own languages when it is the memory's."""
    if direction.pair is not None:
        return direction.pair
    if found.direction is direction:
        return LanguagePair(found.record.source_lang, found.record.target_lang)
    return None


def glossaries_of(registry: Registry, memory_id: int) -> list[str]:
    """The names of every stored glossary of memory `memory_id`."""
    own = f"{GLOSSARY_PREFIX}{memory_id}"
    return [r.name for r in registry.list_glossaries()
            if r.name == own or r.name.startswith(own + ".")]


class ModernMTMemories:
    def __init__(self, directions: Directions, imports: MemoryImports) -> None:
        self.directions = directions
        self.imports = imports

    def admins(self) -> list[tuple[Direction, MemoryAdmin]]:
        found = []
        for direction in self.directions.all:
            admin = direction.memory_admin(self.imports)
            if admin is not None:
                found.append((direction, admin))
        return found

    def all(self) -> list[MemoryRecord]:
        """The memories the request's tenant sees (its own and the shared ones)."""
        scope = current_scope()
        records = [r for _, admin in self.admins() for r in admin.all()
                   if scope.sees("memory", r.name)]
        return sorted(records, key=lambda r: r.id)

    def get(self, memory_id: int) -> Found:
        """The memory; 404 also for another tenant's (as if it did not exist)."""
        scope = current_scope()
        for direction, admin in self.admins():
            record = admin.registry.get_memory(memory_id)
            if record is not None and record.backbone == admin.book.backbone \
                    and scope.sees("memory", record.name):
                return Found(direction, admin, record)
        raise not_found(f"memory {memory_id} does not exist")

    def changed(self, memory_id: int) -> Found:
        """The memory, when the request may change it (a tenant's admin: its own only)."""
        found = self.get(memory_id)
        try:
            current_scope().check_manages("memory", found.record.name)
        except NotFound:
            raise not_found(f"memory {memory_id} does not exist") from None
        except Forbidden as refused:
            raise ModernMTError(403, str(refused)) from None
        return found

    def create(self, name: str, source: str | None, target: str | None) -> MemoryRecord:
        """A new memory, or the one of that name (as ModernMT: creating a name again
        answers the existing memory)."""
        direction = self._direction(source, target)
        admin = direction.memory_admin(self.imports)
        if admin is None:
            raise bad_request("translation memories are off on this server")
        name = current_scope().own_name(name)  # a tenant's names start "<tenant>-"
        existing = admin.registry.find_memory(name, backbone=admin.book.backbone)
        if existing is not None and current_scope().sees("memory", existing.name):
            return existing
        return admin.create(name, domain=None)

    def _direction(self, source: str | None, target: str | None) -> Direction:
        if source is None and target is None:
            return self.directions.default
        for direction in self.directions.all:
            pair = direction.pair
            if pair is not None and pair.source == source and pair.target == target:
                return direction
        raise bad_request(f"no direction {source} -> {target} is served")

    def in_direction(self, direction: Direction, ids: list[int]) -> list[str]:
        """The names of the memories `ids` names in `direction` (those of other
        directions are not in play, as ModernMT ignores memories of other languages);
        an id no direction knows is a 404."""
        names = []
        for memory_id in ids:
            found = self.get(memory_id)
            if found.direction is direction:
                names.append(found.record.name)
        return names


def glossary_tables(data: bytes, served: list[LanguagePair], *, unidirectional: bool
                    ) -> dict[LanguagePair, list[tuple[str, str]]]:
    """ModernMT's CSV glossary: a header row of language codes (Weblate writes
    `source,target`), then one term per column; read as one table of term pairs per
    served direction between two of its columns (codes read loosely: `fr-FR` is `fr`).
    Unidirectional: from the first column into each other one; equivalent: between any
    two. 400 when no served direction is among them."""
    if len(data) > MAX_CSV_BYTES:
        raise bad_request(f"the glossary is larger than {MAX_CSV_BYTES} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise bad_request("the glossary is not UTF-8") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise bad_request("the glossary is empty (a header of language codes first)")
    header = [cell.strip().lower().replace("_", "-").split("-")[0] for cell in rows[0]]
    sources = header[:1] if unidirectional else header
    tables: dict[LanguagePair, list[tuple[str, str]]] = {}
    for pair in served:
        if pair.source not in sources or pair.target not in header:
            continue
        s, t = header.index(pair.source), header.index(pair.target)
        tables[pair] = [(row[s].strip(), row[t].strip()) for row in rows[1:]
                        if len(row) > max(s, t) and row[s].strip() and row[t].strip()]
    if not tables:
        served_text = ", ".join(f"{p.source}->{p.target}" for p in served) or "none"
        raise bad_request(f"the glossary's header names {rows[0]}: no served direction "
                          f"among them (served: {served_text})")
    return tables
