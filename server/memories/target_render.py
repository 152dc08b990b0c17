"""A memory's target, written where the request's text goes.

In plain text the target is the answer as it stands. In HTML (character data or an
attribute value) it is parsed like the request's own text: its words are written escaped
for the context, and its markup is kept only where the request's matched text has the
very same tag (`<b>` for `<b>`): a human's target cannot bring a tag, a script or an
attribute into a page that the page did not hold. A target whose markup the request
does not hold is not used (the machine translates that text instead). Entities, numbers
and placeholders a translator wrote (`1 500`, `&nbsp;`) stay as written.
"""

from __future__ import annotations

from collections.abc import Collection

from server.textproc import html
from server.textproc.escaping import Context, escape
from server.textproc.parts import Part, Text, raw_of
from server.textproc.placeholders import protect


def render_target(target: str, *, context: Context, allowed: Collection[str]) -> str | None:
    """`target` for `context`; `allowed`: the request's markup (raw tags, comments) that
    the target may carry. None when it carries other markup."""
    if context == "text":
        return target
    chunks: list[str | list[Part]]
    if context == "attribute":
        chunks = [protect(target)]
    else:
        found = html.segments(target)
        if found.attributes:  # translatable attributes of its own: not the request's tags
            return None
        chunks = list(found.chunks)
    out: list[str] = []
    for chunk in chunks:
        if isinstance(chunk, str):
            if chunk.strip() and chunk not in allowed:
                return None
            out.append(chunk)
            continue
        for part in chunk:
            if isinstance(part, Text):
                out.append(escape(part.text, context))
                continue
            raw = raw_of(part)
            if "<" in raw and raw not in allowed:
                return None
            out.append(raw)
    return "".join(out)
