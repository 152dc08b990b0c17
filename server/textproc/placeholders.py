"""Spans of plain text that must come back verbatim: placeholders and the like.

Found (leftmost, then longest, never overlapping): printf conversions (`%s`, `%1$s`,
`%-5.2f`, `%(name)s`), brace placeholders with ICU nesting (`{name}`, `{0}`,
`{count, plural, one {# file} other {# files}}`, `{{var}}`), shell-style `${var}` and
`$VAR`, HTML/XML tags written inside a string (`<b>`, `<br/>`), character entities
(`&amp;`, `&#160;`), backslash escapes of catalogs (`\\n`), URLs, e-mail addresses and
numbers (`3`, `1,500.25`, `10:30`). These are lexical patterns of one string each, so
regular expressions fit here; HTML documents go through a real parser (html.py).

The patterns are written to run in linear time on hostile text (issue #19): a match can
start only where its first character class begins a run (the e-mail address's local part
has a look-behind), and no two adjacent quantifiers can take the same characters (a
printf width cannot start with 0, which is a flag). Without that, 10,000 characters of
"a" or of "%000..." cost 0.3 s and 4 s of CPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from server.textproc.parts import Keep, Part, Text

_PATTERNS = "|".join((
    r"(?:https?|ftp)://[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]}]",  # URL (no trailing punctuation)
    r"www\.[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?:/[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]}])?",
    r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+",  # e-mail address
    r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});",  # entity
    r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>",  # a tag inside a string
    r"%%|%\([A-Za-z_][A-Za-z0-9_]*\)[-+#0]*(?:[1-9]\d*)?(?:\.\d+)?[diouxXeEfFgGcrsa]",
    r"%(?:\d+\$)?[-+#0']*(?:[1-9]\d*|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?"
    r"[diouxXeEfFgGaAcspn@]",  # printf (no space flag: "50% of" is prose)
    r"\$\{[^{}\s]*\}|\$[A-Za-z_][A-Za-z0-9_]*",  # ${var}, $VAR
    r"\\[nrt\"'\\]",  # catalog escapes written literally
    r"(?<![\w.,])\d+(?:[.,:]\d+)*(?![\w])",  # number
))
_SPAN = re.compile(_PATTERNS)


def find_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every protected span, in order, never overlapping."""
    found = [(m.start(), m.end()) for m in _SPAN.finditer(text)]
    found += list(_braces(text))
    found.sort(key=lambda span: (span[0], -span[1]))
    chosen: list[tuple[int, int]] = []
    for start, end in found:
        if chosen and start < chosen[-1][1]:
            continue
        chosen.append((start, end))
    return chosen


def _braces(text: str) -> Iterator[tuple[int, int]]:
    """Balanced `{...}` groups (outermost), without whitespace right after `{`: ICU
    messages nest braces, which no regular expression matches."""
    depth = 0
    start = -1
    for index, char in enumerate(text):
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                inner = text[start + 1: index]
                if inner[:1].strip() or inner.startswith("{"):
                    yield start, index + 1
        elif char == "\n":
            depth = 0  # a placeholder never spans lines


def protect(text: str) -> list[Part]:
    """The text as Text parts and Keep parts (the protected spans)."""
    parts: list[Part] = []
    cursor = 0
    for start, end in find_spans(text):
        if start > cursor:
            parts.append(Text(text[cursor:start]))
        parts.append(Keep(text[start:end]))
        cursor = end
    if cursor < len(text):
        parts.append(Text(text[cursor:]))
    return parts
