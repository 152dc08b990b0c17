"""The languages a backbone translates, their names, and language detection.

A backbone translates one source language into one target language. Its manifest says
which: `provenance.languages = {"source": "en", "target": "fr"}` (ISO 639-1), or, for
backbones published without it (the built-in `default-en-fr`, converted `opus-en-de`),
the name's trailing `-<source>-<target>` codes.

Detection uses py3langid (a naive Bayes model over byte n-grams that ships inside its
PyPI package; nothing is downloaded), restricted to the backbone's languages as
LibreTranslate restricts it to the languages it has installed: short texts are far more
reliable among two candidates than among 140.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pycountry
from py3langid.langid import MODEL_FILE, LanguageIdentifier

from model_store import Manifest


@dataclass(frozen=True)
class LanguagePair:
    source: str  # ISO 639-1 code
    target: str

    @property
    def codes(self) -> list[str]:
        return list(dict.fromkeys([self.source, self.target]))

    def describe(self) -> str:
        return (f"this server translates {language_name(self.source)} ({self.source}) into "
                f"{language_name(self.target)} ({self.target})")


def language_name(code: str) -> str:
    """`fr` -> `French`; an unknown code names itself."""
    found = pycountry.languages.get(alpha_2=code)
    return str(found.name) if found is not None else code


def is_language_code(code: str) -> bool:
    return len(code) == 2 and code.isalpha() and code.islower() and (
        pycountry.languages.get(alpha_2=code) is not None)


def language_pair(manifest: Manifest) -> LanguagePair | None:
    """The backbone's language pair, or None when neither its provenance nor its name
    says it."""
    declared = manifest.provenance.get("languages")
    if isinstance(declared, dict):
        source, target = declared.get("source"), declared.get("target")
        if isinstance(source, str) and isinstance(target, str):
            return LanguagePair(source, target)
    return pair_of_name(manifest.name)


def pair_of_name(name: str) -> LanguagePair | None:
    """The pair a backbone's name ends with (`opus-en-de`: en->de), if it does."""
    parts = name.split("-")
    if len(parts) >= 2 and is_language_code(parts[-2]) and is_language_code(parts[-1]):
        return LanguagePair(parts[-2], parts[-1])
    return None


@dataclass(frozen=True)
class Detection:
    language: str
    confidence: float  # 0..1


class LanguageDetector:
    """py3langid restricted to `languages` (empty: every language it knows); the model
    (~0.5 s to read) loads on first use.
    One identifier per instance (py3langid's module-level one is global state)."""

    def __init__(self, languages: list[str]) -> None:
        self.languages = languages
        self._identifier: LanguageIdentifier | None = None
        self._loaded = False
        self._lock = threading.Lock()

    def rank(self, text: str) -> list[Detection]:
        """Every candidate language, most probable first (probabilities sum to 1); none
        when py3langid knows none of the languages."""
        identifier = self._load()
        if identifier is None:
            return []
        return [Detection(str(code), float(p)) for code, p in identifier.rank(text)]

    def _load(self) -> LanguageIdentifier | None:
        with self._lock:
            if not self._loaded:
                identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
                known = [c for c in self.languages if c in set(identifier.labels)]
                if not self.languages:  # every language the model knows
                    self._identifier = identifier
                elif known:
                    identifier.set_languages(known)
                    self._identifier = identifier
                self._loaded = True
            return self._identifier


class LanguageDetectors:
    """One detector per language set, made on first use (the app keeps one of these)."""

    def __init__(self) -> None:
        self._detectors: dict[tuple[str, ...], LanguageDetector] = {}
        self._lock = threading.Lock()

    def get(self, languages: list[str]) -> LanguageDetector:
        key = tuple(languages)
        with self._lock:
            if key not in self._detectors:
                self._detectors[key] = LanguageDetector(languages)
            return self._detectors[key]
