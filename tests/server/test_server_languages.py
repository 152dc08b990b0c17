"""The backbone's language pair (manifest provenance, else its name) and detection."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from model_store import Manifest
from server.textproc.languages import LanguageDetector, LanguagePair, language_name, language_pair


def backbone(name: str, provenance: dict[str, Any] | None = None) -> Manifest:
    return Manifest(kind="backbone", name=name, version=1, created_at=datetime.now(UTC),
                    files={}, backbone_fingerprint="0" * 64, provenance=provenance or {})


@pytest.mark.parametrize(("name", "provenance", "expected"), [
    ("default-en-fr", None, LanguagePair("en", "fr")),
    ("opus-mt-en-de", None, LanguagePair("en", "de")),
    ("tiny", {"languages": {"source": "de", "target": "it"}}, LanguagePair("de", "it")),
    ("default-en-fr", {"languages": {"source": "fr", "target": "en"}}, LanguagePair("fr", "en")),
    ("tiny", None, None),
    ("model-xx-fr", None, None),  # xx is no ISO 639-1 code
    ("model-en-fra", None, None),  # ISO 639-3 codes are not read from names
    ("tiny", {"languages": "en-fr"}, None),
])
def test_language_pair(name: str, provenance: dict[str, Any] | None,
                       expected: LanguagePair | None) -> None:
    assert language_pair(backbone(name, provenance)) == expected


def test_names_and_description() -> None:
    assert language_name("fr") == "French"
    assert language_name("qq") == "qq"
    assert LanguagePair("en", "fr").describe() == (
        "this server translates English (en) into French (fr)")


def test_detection_is_restricted_to_the_given_languages() -> None:
    detector = LanguageDetector(["en", "fr"])
    ranked = detector.rank("Guten Tag, wie geht es Ihnen heute?")
    assert {found.language for found in ranked} == {"en", "fr"}
    assert sum(found.confidence for found in ranked) == pytest.approx(1.0)
    assert detector.rank("Je voudrais un café, s'il vous plaît.")[0].language == "fr"
    assert LanguageDetector(["qq"]).rank("anything") == []
