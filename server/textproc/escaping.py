"""What the model writes, made safe for where it goes.

The engine's output is plain text. In an HTML document it lands in character data or in an
attribute value, where a `<` or `&` it wrote would become markup: the model does write
them, because its training data holds markup as text (software-ui catalogs carry tags
and `&#39;`; the `it` corpus writes the French no-break space as `& #160;`, split by its
tokenizer, 1,562 times; fiction carries `<i>`). So model text is decoded (what it wrote
as an entity is the character it meant) and escaped for its context; what came from the
source (tags, entities, placeholders) is restored verbatim and never passes through here.

Escaping is minimal, by the HTML tokenizer's rules (WHATWG HTML 13.2.5.1 data state,
13.2.5.6 tag open state, 13.2.5.72 character reference state): `<` opens markup only
before a letter, `/`, `!` or `?`, and `&` starts a reference only before a letter, a digit
or `#`; any other `<`, `&` or `>` is text as it stands, so `a < b` stays `a < b`. In an
attribute value both quotes are escaped as well.
"""

from __future__ import annotations

import html
import re
from typing import Literal

Context = Literal["text", "html", "attribute"]  # plain text, HTML character data, a value
_QUOTES = {'"': "&quot;", "'": "&#x27;"}
# "word & #160;:" is the corpus's "word&#160;:" split by its tokenizer, spaces included
_SPLIT_REFERENCE = re.compile(r" *&\s+(#[0-9]{1,7};|#[xX][0-9A-Fa-f]{1,6};)")


def model_text(text: str, context: Context) -> str:
    """Text the model wrote, as it must be written in `context`."""
    if context == "text":
        return text
    return escape(html.unescape(_SPLIT_REFERENCE.sub(r"&\1", text)), context)


def escape(text: str, context: Context) -> str:
    """Literal text (a glossary target, a decoded model output) written in `context`."""
    if context == "text":
        return text
    out: list[str] = []
    for index, char in enumerate(text):
        if opens_markup(text, index):
            out.append("&amp;" if char == "&" else "&lt;")
        elif context == "attribute" and char in _QUOTES:
            out.append(_QUOTES[char])
        else:
            out.append(char)
    return "".join(out)


def opens_markup(text: str, index: int) -> bool:
    """Whether the `<` or `&` at `index` starts a tag, a comment or a reference."""
    char, following = text[index], text[index + 1: index + 2]
    if char == "&":
        return following.isalnum() or following == "#"
    return char == "<" and (following.isalpha() or following in ("/", "!", "?"))
