"""Managing a direction's memories: create, list, delete; add, replace and delete single
pairs; import files (imports.py) and export TMX (tmx_writer.py); a translator's
correction into its domain's memory. Every write is checked here (names, sizes, text)
and synced into this replica's book before it returns; other replicas follow the change
feed (book.py). Blocking (registry reads and writes): callers run it on a worker thread.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from model_store import (
    ConflictError,
    MemoryImport,
    MemoryRecord,
    NewPair,
    NotFoundError,
    Page,
    PairRecord,
    Viewer,
)
from model_store.memory_rows import Replace
from server.core.errors import Conflict, InvalidInput, NotFound
from server.core.tenancy import current_scope
from server.memories.book import MemoryBook
from server.memories.imports import MemoryImports
from server.memories.normalisation import normalised, source_key
from server.memories.tmx_writer import TMX_FOOTER, tmx_header, tmx_units

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")  # ':': Weblate's names
OWNER = "shared"  # until memories belong to tenants
PAGE = 1000


@dataclass(frozen=True)
class PairText:
    source: str
    target: str
    tuid: str | None = None


class MemoryAdmin:
    def __init__(self, book: MemoryBook, imports: MemoryImports, *,
                 languages: tuple[str, str] | None) -> None:
        self.book = book
        self.registry = book.registry
        self.imports = imports
        self.languages = languages  # the direction's (None: its backbone does not say)

    # -- memories ------------------------------------------------------------------------
    def all(self) -> list[MemoryRecord]:
        return self.registry.list_memories(backbone=self.book.backbone)

    def page(self, *, viewer: Viewer | None, after: str | None,
             limit: int) -> Page[MemoryRecord]:
        """The direction's memories by name, `limit` past `after`, that `viewer` sees."""
        return self.registry.memory_page(backbone=self.book.backbone, viewer=viewer,
                                         after=after, limit=limit)

    def create(self, name: str, *, domain: str | None,
               languages: tuple[str, str] | None = None) -> MemoryRecord:
        languages = languages or self.languages
        if languages is None:
            raise InvalidInput("this direction's backbone does not say its languages: give "
                               "the memory's source and target", field="source")
        _check_name(name)
        try:
            created = self.registry.create_memory(
                name, backbone=self.book.backbone, domain=domain,
                owner=current_scope().tenant or OWNER,
                source_lang=languages[0], target_lang=languages[1])
        except ConflictError as error:
            raise Conflict(str(error), field="domain" if "domain" in str(error) else "name"
                           ) from None
        self.book.sync()
        return created

    def get(self, name: str) -> MemoryRecord:
        found = self.registry.find_memory(name, backbone=self.book.backbone)
        scope = current_scope()  # another tenant's memory is one that does not exist
        if found is None or not scope.sees("memory", found.name):
            known = ", ".join(scope.visible_names("memory", (m.name for m in self.all()))
                              ) or "none"
            raise NotFound(f"unknown memory {name[:64]!r}; memories of this direction: "
                           f"{known}", field="name")
        return found

    def rename(self, name: str, new_name: str) -> MemoryRecord:
        """The memory `name` named `new_name` (409 when the direction has a memory of
        that name); requests name it by its new name on every replica within a second."""
        _check_name(new_name)
        memory = self.get(name)
        try:
            renamed = self.registry.rename_memory(memory.id, new_name)
        except NotFoundError:
            raise NotFound(f"memory {name!r} was deleted", field="name") from None
        except ConflictError:
            raise Conflict(f"this direction has a memory named {new_name!r} already: "
                           "choose another name, or delete that memory first",
                           field="name") from None
        self.book.sync()
        return renamed

    def delete(self, name: str) -> MemoryRecord:
        memory = self.get(name)
        if not self.registry.delete_memory(memory.id):
            raise NotFound(f"unknown memory {name[:64]!r}", field="name")
        self.book.sync()
        return memory

    # -- pairs ---------------------------------------------------------------------------
    def add_pair(self, name: str, pair: PairText, *, replace: Replace | None = None,
                 origin: str = "api") -> PairRecord:
        memory = self.get(name)
        if memory.pairs >= self.book.settings.max_pairs:
            raise Conflict(f"memory {name!r} holds {memory.pairs} pairs, the most a memory "
                           "may hold (NMT_MEMORIES__MAX_PAIRS)", field="name")
        if replace == "tuid" and pair.tuid is None:
            raise InvalidInput("replace \"tuid\" needs the pair's tuid", field="tuid")
        try:
            added = self.registry.add_pair(memory.id, self._checked(pair, origin),
                                           replace=replace)
        except NotFoundError:
            raise NotFound(f"memory {name!r} was deleted", field="name") from None
        self.book.sync()
        return added

    def replace_pair(self, name: str, pair_id: int, pair: PairText) -> PairRecord:
        memory = self.get(name)
        replaced = self.registry.replace_pair(memory.id, pair_id, self._checked(pair, "api"))
        if replaced is None:
            raise NotFound(f"memory {name!r} has no pair {pair_id}", field="pair_id")
        self.book.sync()
        return replaced

    def delete_pair(self, name: str, pair_id: int) -> None:
        memory = self.get(name)
        if not self.registry.delete_pair(memory.id, pair_id):
            raise NotFound(f"memory {name!r} has no pair {pair_id}", field="pair_id")
        self.book.sync()

    def pairs(self, name: str, *, after: int, limit: int) -> list[PairRecord]:
        return self.registry.pairs_after(self.get(name).id, after, limit=limit)

    def _checked(self, pair: PairText, origin: str) -> NewPair:
        limit = self.book.settings.max_segment_chars
        for field, text in (("source", pair.source), ("target", pair.target)):
            if not normalised(text):
                raise InvalidInput(f"the pair's {field} is empty", field=field)
            if len(text) > limit:
                raise InvalidInput(f"the pair's {field} has {len(text)} characters; at most "
                                   f"{limit} (NMT_MEMORIES__MAX_SEGMENT_CHARS)", field=field)
        return NewPair(source=pair.source, target=pair.target,
                       source_key=source_key(pair.source), tuid=pair.tuid, origin=origin)

    # -- corrections ---------------------------------------------------------------------
    def add_correction(self, domain: str, source: str, corrected: str) -> PairRecord:
        """A translator's correction into its domain's memory (created, named after the
        domain, when it has none), replacing what that memory held for the same source."""
        memory = self.book.view.of_domain(domain)
        name = memory.record.name if memory is not None else None
        if name is None:
            taken = {m.name for m in self.all()}
            name = domain if domain not in taken else f"{domain}-corrections"
            try:
                name = self.create(name, domain=domain,
                                   languages=self.languages or ("", "")).name
            except Conflict:  # another replica made it meanwhile
                self.book.sync()
                made = self.book.view.of_domain(domain)
                if made is None:
                    raise
                name = made.record.name
        return self.add_pair(name, PairText(source, corrected), replace="source",
                             origin="correction")

    # -- files ---------------------------------------------------------------------------
    def job(self, job_id: str) -> MemoryImport:
        found = self.registry.get_memory_import(job_id)
        memory = None if found is None else self.registry.get_memory(found.memory_id)
        # only the memory's owner imports into it: another tenant's job is unknown
        if found is None or memory is None \
                or not current_scope().follows_job_of("memory", memory.name):
            raise NotFound(f"unknown import job {job_id[:40]!r}", field="job_id")
        return found

    def export(self, name: str) -> Iterator[bytes]:
        """The memory as TMX 1.4, page by page (the memory is found before the first
        byte: an unknown name is a 404, not a broken download)."""
        memory = self.get(name)

        def pages() -> Iterator[bytes]:
            yield tmx_header(memory)
            after = 0
            while page := self.registry.pairs_after(memory.id, after, limit=PAGE):
                yield b"".join(tmx_units(memory, page))
                after = page[-1].id
            yield TMX_FOOTER
        return pages()


def _check_name(name: str) -> None:
    if not NAME.match(name):
        raise InvalidInput(f"memory name {name[:80]!r} is not allowed: 1-64 letters, "
                           "digits, '_', '.', ':', '-', starting with a letter or digit",
                           field="name")
