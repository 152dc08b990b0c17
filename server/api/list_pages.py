"""Pages of the admin lists of keys, glossaries, memories and jobs: `limit` entries after
the cursor `after`, and `next_after`, the cursor of the next page (None on the last), as
`GET /admin/domains` pages domains. The registry reads each page (model_store/admin_pages.py).

A list is filtered to what the caller sees before it is paged, so a tenant admin's page
holds `limit` of its own entries while more follow. The cursor is the entry's sort key:
a name for glossaries and memories (name order), and for keys and jobs (oldest first) its
creation time and id, `<ISO time>~<id>`, which sorts as they do.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, TypeVar

from fastapi import Query

from model_store import CreatedKey, Page, Viewer
from server.core.errors import InvalidInput
from server.core.tenancy import TenantScope

T = TypeVar("T")
DEFAULT_LIMIT, MAX_LIMIT = 100, 1000
MAX_CURSOR_CHARS = 200
CURSOR_TIME = "%Y-%m-%dT%H:%M:%S.%f"  # fixed width: cursors sort as their times
ListLimit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="entries per page")]
ListAfter = Annotated[str | None, Query(
    max_length=MAX_CURSOR_CHARS, description="the `next_after` of the previous page: the "
                                             "entries after it")]


def created_cursor(created_at: datetime, entry_id: str) -> str:
    """The cursor of an entry listed oldest first."""
    return f"{created_at.strftime(CURSOR_TIME)}~{entry_id}"


def created_key(after: str | None) -> CreatedKey | None:
    """The (creation time, id) that `created_cursor` wrote into `after` (422 for any other
    text: it names no place in the list)."""
    if after is None:
        return None
    stamp, tilde, entry_id = after.partition("~")
    try:
        created = datetime.strptime(stamp, CURSOR_TIME).replace(tzinfo=UTC)
    except ValueError:
        created = None
    if created is None or not tilde or not entry_id:
        raise InvalidInput(f"`after` {after[:64]!r} is not a cursor of this list: give the "
                           "`next_after` of the previous page", field="after")
    return created, entry_id


def viewer_of(scope: TenantScope) -> Viewer | None:
    """Whom a list of glossaries, memories or jobs is filtered for (None: the caller sees
    every entry: the operator, and anyone while no tenant exists)."""
    return None if scope.operator or not scope.tenants else Viewer(scope.tenant)


def next_after(page: Page[T], key: Callable[[T], str]) -> str | None:
    """The cursor of the page after `page` (None: it is the last)."""
    return key(page.entries[-1]) if page.more and page.entries else None
