"""Glossaries the server applies: per request, stored by name, or a domain's default.

A request's own `glossary` wins, then its `glossary_id`, then the stored glossary that is
the default of the domain the text was routed to (single-domain routing only). Stored
glossaries are validated with the same rules as per-request ones before they are written;
compiled glossaries are cached by (name, updated_at). The domains' defaults live in memory:
a request never reads the registry for them. `keep_defaults_fresh` rereads all of them in
one query every `DEFAULTS_REFRESH_S`, off the event loop, so that another replica's admin
writes apply here within that time; this server's own apply at once. (Read per request,
one registry query per domain and second cost ~8% of the event loop's CPU at saturation,
most of it in SQLAlchemy compiling the statement's parameters.)
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from model_store import ConflictError, GlossaryRecord, Registry
from server.core.errors import Conflict, InvalidInput, NotFound
from server.core.settings import LimitSettings
from server.core.tenancy import current_scope
from server.textproc.glossary import Glossary, build_glossary

log = logging.getLogger(__name__)
DEFAULTS_REFRESH_S = 1.0
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class GlossaryChoice:
    """What a request asked for (None: nothing)."""

    entries: Mapping[str, str] | None = None
    glossary_id: str | None = None
    field: str = "glossary"
    id_field: str = "glossary_id"


class GlossaryBook:
    def __init__(self, registry: Registry, limits: LimitSettings, *,
                 backbone: str | None = None) -> None:
        self.registry = registry
        self.limits = limits
        self.backbone = backbone  # whose domains' defaults (None: the default backbone's)
        self._compiled: dict[str, tuple[object, Glossary]] = {}
        self._defaults: dict[str, Glossary] = {}  # by domain
        self.reload_defaults()

    def validate(self, entries: Iterable[tuple[str, str]], *, field: str,
                 forbidden: Sequence[str] = ()) -> Glossary:
        return build_glossary(entries, field=field, forbidden=forbidden,
                              max_entries=self.limits.max_glossary_entries,
                              max_term_chars=self.limits.max_glossary_term_chars)

    def explicit(self, choice: GlossaryChoice) -> Glossary | None:
        """The request's own glossary or its stored one (404 for an unknown id)."""
        if choice.entries is not None:
            return self.validate(choice.entries.items(), field=choice.field)
        if choice.glossary_id is None:
            return None
        record = self.registry.get_glossary(choice.glossary_id)
        scope = current_scope()  # another tenant's glossary is one that does not exist
        if record is None or not scope.sees("glossary", record.name):
            known = ", ".join(scope.visible_names(
                "glossary", (r.name for r in self.registry.list_glossaries()))) or "none"
            raise NotFound(f"unknown glossary {choice.glossary_id!r}; stored: {known}",
                           field=choice.id_field)
        return self._compile(record)

    def domain_default(self, domain: str) -> Glossary | None:
        return self._defaults.get(domain)

    def forbidden_targets(self, choice: GlossaryChoice, domain: str | None) -> tuple[str, ...]:
        """The target strings a request's output must not hold: its glossary's forbidden
        terms (the request's own or stored one, else the default of `domain`, the domain
        it was routed to), for the search to ban; () when no glossary applies."""
        glossary = self.explicit(choice)
        if glossary is None and domain is not None:
            glossary = self.domain_default(domain)
        return glossary.forbidden if glossary is not None else ()

    def reload_defaults(self) -> None:
        """Reread every domain's default glossary (one registry read) and swap them in."""
        self._defaults = {domain: self._compile(record)
                          for domain, record in self.registry.glossary_defaults(
                              backbone=self.backbone).items()}

    async def keep_defaults_fresh(self, interval_s: float = DEFAULTS_REFRESH_S) -> None:
        """`reload_defaults` on a worker thread every `interval_s`, until cancelled; a
        failed read is logged and the defaults in memory stay until the next one."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                await asyncio.to_thread(self.reload_defaults)
            except Exception:
                log.exception("rereading the domains' default glossaries failed")

    def _compile(self, record: GlossaryRecord) -> Glossary:
        cached = self._compiled.get(record.name)
        if cached is not None and cached[0] == record.updated_at:
            return cached[1]
        glossary = self.validate(record.entries, field=f"glossary {record.name!r}",
                                 forbidden=record.forbidden)
        self._compiled[record.name] = (record.updated_at, glossary)
        return glossary

    # -- admin -------------------------------------------------------------------------
    def put(self, name: str, entries: list[tuple[str, str]], *, default_for: str | None,
            field: str, forbidden: Sequence[str] = ()) -> tuple[GlossaryRecord, bool]:
        """Validate, then store in one write (nothing is stored when a term is bad)."""
        check_name(name)
        self.validate(entries, field=field, forbidden=forbidden)
        try:
            return self.registry.put_glossary(name, entries, default_for=default_for,
                                              backbone=self.backbone, forbidden=forbidden)
        except ConflictError as error:
            raise Conflict(str(error), field="default_for") from None
        finally:
            self.reload_defaults()

    def get(self, name: str) -> GlossaryRecord:
        record = self.registry.get_glossary(name)
        if record is None:
            raise NotFound(f"unknown glossary {name!r}", field="name")
        return record

    def delete(self, name: str) -> None:
        if not self.registry.delete_glossary(name):
            raise NotFound(f"unknown glossary {name!r}", field="name")
        self._compiled.pop(name, None)
        self.reload_defaults()


def check_name(name: str) -> None:
    if not NAME.match(name):
        raise InvalidInput(f"glossary name {name!r} is not allowed: 1-64 characters of "
                           "letters, digits, '_', '.', '-', starting with a letter or digit",
                           field="name")
