"""Which direction a DeepL call translates: from `source_lang` (or, without one, the
detected language) into `target_lang`, among the served directions; and the language
pairs the door lists (languages, glossary pairs)."""

from __future__ import annotations

from server.api.deepl.errors import DeepLError
from server.core.errors import UnsupportedLanguage
from server.serving.directions import AUTO, Direction, Directions
from server.serving.runtime import Runtime
from server.textproc.languages import Detection, LanguagePair, language_pair


def served_pairs(runtime: Runtime, directions: Directions | None) -> list[LanguagePair]:
    """Every served language pair, the default first (503 when none is served)."""
    pairs = [pair for pair, _ in directions.served()] if directions is not None else []
    backbone = runtime.backbone
    own = language_pair(backbone) if backbone is not None and runtime.available else None
    if own is not None and own not in pairs:
        pairs.insert(0, own)
    if not pairs:
        raise DeepLError(503, "no backbone that names its languages is loaded; "
                              "see /health/ready")
    return pairs


async def chosen_direction(directions: Directions, source: str | None, target: str,
                           texts: list[str]) -> tuple[Direction, Detection | None]:
    """The direction into `target`; without `source` the texts' language picks it (DeepL
    detects the source), and when detection names no served source any direction into
    `target` does."""
    if source is not None:
        return directions.pick(source, target), None
    try:
        choice = await directions.choose(AUTO, target, texts)
    except UnsupportedLanguage:
        return directions.pick(None, target), None
    return choice.direction, choice.detected


def check_target(pairs: list[LanguagePair], source: str | None, target: str,
                 shown: str) -> None:
    """DeepL's 400 for a target (or source) no served direction has."""
    if target not in {pair.target for pair in pairs}:
        raise DeepLError(400, f"Value for 'target_lang' not supported: {shown}")
    if source is not None and source not in {pair.source for pair in pairs}:
        raise DeepLError(400, f"Value for 'source_lang' not supported: {source.upper()}")
