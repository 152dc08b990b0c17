"""Pages of the admin lists of keys, glossaries, memories and jobs: `limit` entries after
the cursor `after`, and `next_after`, the cursor of the next page (None on the last), as
`GET /admin/domains` pages domains.

A list is filtered to what the caller sees before it is paged, so a tenant admin's page
holds `limit` of its own entries while more follow. The cursor is the entry's sort key:
a name for glossaries and memories (name order), and for keys and jobs (oldest first) its
creation time and id, `<ISO time>~<id>`, which sorts as they do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Annotated, TypeVar

from fastapi import Query

T = TypeVar("T")
DEFAULT_LIMIT, MAX_LIMIT = 100, 1000
MAX_CURSOR_CHARS = 200
ListLimit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="entries per page")]
ListAfter = Annotated[str | None, Query(
    max_length=MAX_CURSOR_CHARS, description="the `next_after` of the previous page: the "
                                             "entries after it")]


def created_cursor(created_at: datetime, entry_id: str) -> str:
    """The cursor of an entry listed oldest first (fixed width, so strings sort as times)."""
    return f"{created_at.strftime('%Y-%m-%dT%H:%M:%S.%f')}~{entry_id}"


def page(entries: Sequence[T], key: Callable[[T], str], *, after: str | None,
         limit: int) -> tuple[list[T], str | None]:
    """The entries (in `key` order) past `after`, at most `limit`, and the next cursor."""
    rest = [entry for entry in entries if after is None or key(entry) > after]
    chosen = rest[:limit]
    return chosen, (key(chosen[-1]) if len(rest) > limit else None)
