"""Reading a LibreTranslate request: a JSON object, or form fields (urlencoded or
multipart, plus the query string, as LibreTranslate reads `request.values`). A form field
sent several times (`q=a&q=b`, how HTTP clients send a list) is a list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fastapi import Request
from pydantic import TypeAdapter, ValidationError

from server.api.door_values import DoorRules, read_door_values
from server.api.libretranslate.errors import bad_request, missing
from server.api.schemas import DomainField

Format = Literal["text", "html"]
FORMATS: tuple[Format, ...] = ("text", "html")
_DOMAIN = TypeAdapter[DomainField](DomainField)


# LibreTranslate normalises form line endings to LF (RFC 2046 section 4.1.1)
RULES = DoorRules(refuse=bad_request, invalid_json="Invalid JSON format",
                  not_an_object="Invalid JSON format",
                  file_field="Invalid request: {key} must be text, not a file",
                  empty_json_is_empty=False, query_beside_json=False,
                  form_line_endings_lf=True)


async def read_values(request: Request) -> dict[str, Any]:
    """The request's parameters by name."""
    return await read_door_values(request, RULES)


@dataclass(frozen=True)
class TranslateParams:
    texts: list[str]
    batch: bool  # q was a list: the answer's fields are lists too
    source: str  # a language code or "auto"
    target: str
    format: Format
    alternatives: int
    domain: DomainField
    api_key: str | None


def translate_params(values: dict[str, Any]) -> TranslateParams:
    """Validated in LibreTranslate's order: q, source, target, alternatives, format."""
    texts, batch = _texts(values.get("q"))
    source = _required_text(values, "source")
    target = _required_text(values, "target")
    return TranslateParams(texts, batch, source, target, _format(values.get("format")),
                           _alternatives(values.get("alternatives")),
                           _domain(values.get("domain")), optional_text(values, "api_key"))


def detect_texts(values: dict[str, Any]) -> list[str]:
    return _texts(values.get("q"))[0]


def _texts(q: Any) -> tuple[list[str], bool]:
    if not q:
        raise missing("q")
    texts = [q] if isinstance(q, str) else q
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise bad_request("Invalid request: q must be a string or a list of strings")
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise bad_request("Invalid request: q is not valid Unicode (lone surrogate)"
                              ) from None
    return texts, isinstance(q, list)


def _required_text(values: dict[str, Any], name: str) -> str:
    value = values.get(name)
    if not value:
        raise missing(name)
    if not isinstance(value, str):
        raise bad_request(f"Invalid request: {name} must be a language code (a string)")
    return value


def optional_text(values: dict[str, Any], name: str) -> str | None:
    value = values.get(name)
    if value is not None and not isinstance(value, str):
        raise bad_request(f"Invalid request: {name} must be a string")
    return value or None


def required_string(values: dict[str, Any], name: str) -> str:
    """A required text parameter (`/suggest`'s `q`, `s`, `source`, `target`)."""
    value = values.get(name)
    if not value:
        raise missing(name)
    if not isinstance(value, str):
        raise bad_request(f"Invalid request: {name} must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise bad_request(f"Invalid request: {name} is not valid Unicode (lone surrogate)"
                          ) from None
    return value


def _alternatives(value: Any) -> int:
    if value is None or value == "":
        return 0
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise bad_request("Invalid request: alternatives parameter is not a number")
    try:
        return max(0, int(value))
    except ValueError:
        raise bad_request("Invalid request: alternatives parameter is not a number") from None


def _format(value: Any) -> Format:
    if value is None or value == "":
        return "text"
    for known in FORMATS:
        if value == known:
            return known
    raise bad_request(f"{value} format is not supported; formats: {', '.join(FORMATS)}")


def _domain(value: Any) -> DomainField:
    if value == "":
        return None
    try:
        return _DOMAIN.validate_python(value, strict=True)  # weights: numbers, not booleans
    except ValidationError:
        raise bad_request('Invalid request: domain must be a domain name, "auto", "generic" '
                          'or weights like {"medical": 0.7, "law": 0.3}') from None
