"""Reading a DeepL request: a JSON object, or form fields (urlencoded or multipart, plus
the query string; DeepL's older clients send forms, and GETs carry their parameters in
the query or a form body). A form field sent several times (`text=a&text=b`, how DeepL's
form clients send a list) is a list. Language codes are DeepL's (`EN`, `EN-US`, `PT-BR`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request

from server.api.deepl.errors import bad_request
from server.api.door_values import DoorRules, read_door_values
from server.memories.book import MemoryChoice
from server.textproc.line_layout import SplitMode

TAG_HANDLINGS = ("xml", "html")
FORMALITIES = ("default", "more", "less", "prefer_more", "prefer_less")
SPLITS: dict[str, SplitMode] = {"0": "off", "1": "on", "nonewlines": "nonewlines"}


RULES = DoorRules(refuse=bad_request, invalid_json="Invalid JSON in the request body",
                  not_an_object="The JSON body must be an object",
                  file_field="Parameter '{key}' must be text, not a file",
                  empty_json_is_empty=True, query_beside_json=True,
                  form_line_endings_lf=False)


async def read_values(request: Request) -> dict[str, Any]:
    """The request's parameters by name."""
    return await read_door_values(request, RULES)


@dataclass(frozen=True)
class TranslateParams:
    texts: list[str]
    source: str | None  # our code (`en`); None: detect it
    target: str  # our code
    target_shown: str  # as DeepL names it (`EN-US`), for messages
    context: str | None
    formality: str
    glossary_id: str | None
    tag_handling: str | None
    split: SplitMode  # where plain text's sentences end
    billed: bool  # show_billed_characters


def translate_params(values: dict[str, Any]) -> TranslateParams:
    texts = _texts(values.get("text"))
    target_shown = optional(values, "target_lang")
    if target_shown is None:
        raise bad_request("Value for 'target_lang' not supported. Parameter 'target_lang' "
                          "is required")
    source = optional(values, "source_lang")
    formality = (optional(values, "formality") or "default").lower()
    if formality not in FORMALITIES:
        raise bad_request(f"Value for 'formality' not supported: {formality}; one of "
                          + ", ".join(FORMALITIES))
    tag_handling = optional(values, "tag_handling")
    if tag_handling is not None and tag_handling not in TAG_HANDLINGS:
        raise bad_request(f"Value for 'tag_handling' not supported: {tag_handling}; "
                          "xml or html")
    split = optional(values, "split_sentences") or "1"
    if split not in SPLITS:
        raise bad_request(f"Value for 'split_sentences' not supported: {split}; "
                          "0, 1 or nonewlines")
    billed = str(values.get("show_billed_characters", "")).lower() in ("1", "true")
    return TranslateParams(texts, None if source is None else our_code(source),
                           our_code(target_shown), target_shown.upper(),
                           optional(values, "context"), formality,
                           optional(values, "glossary_id"), tag_handling, SPLITS[split],
                           billed)


def optional(values: dict[str, Any], name: str) -> str | None:
    value = values.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise bad_request(f"Parameter '{name}' must be a string")
    return value


def our_code(deepl_code: str) -> str:
    """DeepL's `EN-US`, `PT-BR`, `ZH-HANS` -> the served language `en`, `pt`, `zh`."""
    return deepl_code.split("-")[0].strip().lower()


def deepl_code(code: str) -> str:
    return code.upper()


def target_codes(code: str) -> list[str]:
    """The DeepL target codes of a served target language (DeepL's clients refuse a bare
    `EN` or `PT` target, so those are listed with their variants)."""
    variants = {"en": ["EN-GB", "EN-US"], "pt": ["PT-BR", "PT-PT"]}
    return variants.get(code, [deepl_code(code)])


def _texts(value: Any) -> list[str]:
    if value is None or value == "" or value == []:
        raise bad_request("Parameter 'text' not specified")
    texts = value if isinstance(value, list) else [value]
    if not all(isinstance(text, str) for text in texts):
        raise bad_request("Parameter 'text' must be a string or a list of strings")
    return texts


def translation_memory(values: dict[str, Any]) -> MemoryChoice:
    """DeepL's `translation_memory_id` (a memory's name here: docs/API.md, "Translation
    memories") and `translation_memory_threshold` (an integer 0-100; the server's memories
    answer exact matches only, so any threshold uses the same ones)."""
    threshold = values.get("translation_memory_threshold")
    if threshold is not None and threshold != "":
        text = str(threshold).strip()
        if not text.isdigit() or int(text) > 100:
            raise bad_request("Value for 'translation_memory_threshold' not supported: "
                              f"{text[:20]}; an integer from 0 to 100")
    name = optional(values, "translation_memory_id")
    if name is None:
        return MemoryChoice()
    return MemoryChoice(names=(name,), field="translation_memory_id")
