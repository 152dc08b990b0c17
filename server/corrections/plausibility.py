"""Is a correction plausibly a translation of its source? Every refusal says why.

Checks, in order: an empty corrected target; one that copies the source; one that changes
nothing of the machine output; a length ratio far from a translation's (characters; the
en-fr training pairs of the default model have French 1.1-1.2x as long as English); a
target identified as the source language rather than the target language (py3langid,
restricted to the pair's two languages, as `/libretranslate/detect`). Duplicates are
checked against the registry by the caller (`CorrectionDesk`).
"""

from __future__ import annotations

import unicodedata

from server.core.settings import CorrectionSettings
from server.textproc.languages import LanguageDetector, LanguagePair


def normalised(text: str) -> str:
    """Case, Unicode form and whitespace do not make two texts different."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def implausible(source: str, machine: str | None, corrected: str, *,
                pair: LanguagePair | None, detector: LanguageDetector | None,
                settings: CorrectionSettings) -> str | None:
    """Why the correction is refused, or None when it is plausible (without a language
    pair, a backbone that does not declare one, the language is not checked)."""
    target = normalised(corrected)
    if not target:
        return "the corrected translation is empty"
    if not normalised(source):
        return "the source text is empty"
    if target == normalised(source):
        return "the corrected translation is a copy of the source text"
    if machine is not None and target == normalised(machine):
        return "the corrected translation is the machine translation unchanged"
    longer = max(len(source.strip()), len(corrected.strip()))
    ratio = len(corrected.strip()) / max(len(source.strip()), 1)
    if longer >= settings.ratio_min_chars and not (
            settings.min_length_ratio <= ratio <= settings.max_length_ratio):
        return (f"the corrected translation is {ratio:.2f} times as long as the source; a "
                f"translation is {settings.min_length_ratio}-{settings.max_length_ratio} "
                "times as long")
    if pair is None or detector is None or pair.source == pair.target:
        return None
    if len(corrected.strip()) >= settings.language_min_chars:
        ranked = detector.rank(corrected)
        if ranked and ranked[0].language != pair.target:
            return (f"the corrected translation reads as {ranked[0].language} "
                    f"({ranked[0].confidence:.0%}), not {pair.target}: it should be in the "
                    "target language")
    return None
