"""Glossaries the server applies: per request, stored by name, or a domain's default.

A request's own `glossary` wins, then its `glossary_id`, then the stored glossary that is
the default of the domain the text was routed to (single-domain routing only). Stored
glossaries are validated with the same rules as per-request ones before they are written;
compiled glossaries are cached by (name, updated_at). A domain's default is looked up at
most once per `DEFAULT_TTL_S` per domain (a request pays no registry read on the hot path);
this server's own admin writes apply at once, another replica's within that time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from model_store import ConflictError, GlossaryRecord, Registry
from server.errors import Conflict, InvalidInput, NotFound
from server.settings import LimitSettings
from server.textproc.glossary import Glossary, build_glossary

DEFAULT_TTL_S = 1.0
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class GlossaryChoice:
    """What a request asked for (None: nothing)."""

    entries: Mapping[str, str] | None = None
    glossary_id: str | None = None
    field: str = "glossary"
    id_field: str = "glossary_id"


class GlossaryBook:
    def __init__(self, registry: Registry, limits: LimitSettings) -> None:
        self.registry = registry
        self.limits = limits
        self._compiled: dict[str, tuple[object, Glossary]] = {}
        self._defaults: dict[str, tuple[float, Glossary | None]] = {}  # domain -> (expiry, g)

    def validate(self, entries: Iterable[tuple[str, str]], *, field: str) -> Glossary:
        return build_glossary(entries, field=field,
                              max_entries=self.limits.max_glossary_entries,
                              max_term_chars=self.limits.max_glossary_term_chars)

    def explicit(self, choice: GlossaryChoice) -> Glossary | None:
        """The request's own glossary or its stored one (404 for an unknown id)."""
        if choice.entries is not None:
            return self.validate(choice.entries.items(), field=choice.field)
        if choice.glossary_id is None:
            return None
        record = self.registry.get_glossary(choice.glossary_id)
        if record is None:
            known = ", ".join(r.name for r in self.registry.list_glossaries()) or "none"
            raise NotFound(f"unknown glossary {choice.glossary_id!r}; stored: {known}",
                           field=choice.id_field)
        return self._compile(record)

    def domain_default(self, domain: str) -> Glossary | None:
        cached = self._defaults.get(domain)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            return cached[1]
        record = self.registry.glossary_for_domain(domain)
        glossary = None if record is None else self._compile(record)
        self._defaults[domain] = (now + DEFAULT_TTL_S, glossary)
        return glossary

    def _compile(self, record: GlossaryRecord) -> Glossary:
        cached = self._compiled.get(record.name)
        if cached is not None and cached[0] == record.updated_at:
            return cached[1]
        glossary = self.validate(record.entries, field=f"glossary {record.name!r}")
        self._compiled[record.name] = (record.updated_at, glossary)
        return glossary

    # -- admin -------------------------------------------------------------------------
    def put(self, name: str, entries: list[tuple[str, str]], *, default_for: str | None,
            field: str) -> tuple[GlossaryRecord, bool]:
        check_name(name)
        self.validate(entries, field=field)
        try:
            return self.registry.put_glossary(name, entries, default_for=default_for)
        except ConflictError as error:
            raise Conflict(str(error), field="default_for") from None
        finally:
            self._defaults.clear()

    def get(self, name: str) -> GlossaryRecord:
        record = self.registry.get_glossary(name)
        if record is None:
            raise NotFound(f"unknown glossary {name!r}", field="name")
        return record

    def delete(self, name: str) -> None:
        if not self.registry.delete_glossary(name):
            raise NotFound(f"unknown glossary {name!r}", field="name")
        self._compiled.pop(name, None)
        self._defaults.clear()


def check_name(name: str) -> None:
    if not NAME.match(name):
        raise InvalidInput(f"glossary name {name!r} is not allowed: 1-64 characters of "
                           "letters, digits, '_', '.', '-', starting with a letter or digit",
                           field="name")
