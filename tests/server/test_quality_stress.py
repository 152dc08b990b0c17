"""A stress set on the embedded default model (en -> fr), through HTTP with the served
defaults (beam 4, detectors and recovery on): whatever the lines hold, as many lines come
back as went in, no output loops, and no line with words to translate comes back as an
untranslated copy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from server.app import create_app
from server.quality.features import copy_share, repeated_ngrams, words
from server.settings import Settings

LONG = ("The committee, having examined the report submitted by the member states on the "
        "application of the regulation during the previous financial year, and having "
        "consulted the relevant stakeholders in every region concerned, decided that the "
        "measures should be extended for another two years and that a further evaluation "
        "should take place before the end of that period.")
STRESS = [
    "Name | Dose | Frequency",
    "Paracetamol | 500 mg | twice a day",
    "- Take one tablet in the morning.",
    "2. Store the bottle in a cool place.",
    "DO NOT TAKE MORE THAN THE RECOMMENDED DOSE.",
    "We love this city 😍🎉 and we will come back!",
    "See https://example.org/help?id=3 for more details.",
    "for (int i = 0; i < n; i++) { total += i; }",
    LONG,
    "",
    "Yes",
    "Thanks",
    "very very very very very good",
    "The the the the house is big.",
    "   indented line with trailing spaces   ",
]
# lines with words that must be translated (not code, not one word, not a table header)
MUST_TRANSLATE = [2, 3, 4, 5, 6, 8, 13]


@pytest.fixture(scope="module")
def default_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(store_dir=tmp_path_factory.mktemp("stress") / "store",
                        builtin_artifacts=True,
                        scheduler={"request_timeout_s": 600})  # a busy CI machine
    with TestClient(create_app(settings)) as client:
        yield client


def post(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


@pytest.mark.parametrize("action", ["flag", "source", "omit"])
def test_lines_in_equal_lines_out(default_client: TestClient, action: str) -> None:
    text = "\n".join(STRESS)
    result = post(default_client, {"text": text, "on_low_quality": action})
    lines = result["translation"].split("\n")
    assert len(lines) == len(STRESS)
    assert lines[STRESS.index("")] == ""
    assert lines[-1].startswith("   ") and lines[-1].endswith("   ")


@pytest.mark.parametrize("split", ["off", "nonewlines"])
def test_lines_in_equal_lines_out_whatever_the_sentence_split(default_client: TestClient,
                                                              split: str) -> None:
    """A sentence may then span lines (DeepL's split_sentences): its translation is laid
    back out on the source's lines."""
    text = "\n".join(STRESS) + "\n\nThe patient takes one tablet\na day with food.\n"
    result = post(default_client, {"text": text, "split_sentences": split})
    lines = result["translation"].split("\n")
    assert len(lines) == len(text.split("\n"))
    assert lines[STRESS.index("")] == "" and lines[-1] == "" and lines[-4] == ""
    assert lines[len(STRESS) - 1].startswith("   ")
    wrapped = [s for s in result["sentences"] if s["source"].startswith("The patient")]
    assert len(wrapped) == 1 and "\n" in wrapped[0]["source"]


def test_no_loops_and_no_untranslated_copies(default_client: TestClient) -> None:
    result = post(default_client, {"text": "\n".join(STRESS)})
    lines = result["translation"].split("\n")
    for index in MUST_TRANSLATE:
        source, output = STRESS[index], lines[index]
        assert output.strip(), f"line {index} came back empty"
        assert copy_share(source, output) < 0.7, (source, output)
    for sentence in result["sentences"]:
        tokens = words(sentence["translation"])
        assert repeated_ngrams(tokens) <= repeated_ngrams(words(sentence["source"])) + 0.25, \
            sentence
        assert 0.0 <= sentence["quality"] <= 1.0


@pytest.mark.parametrize("line", [STRESS[0], STRESS[5], STRESS[10], STRESS[12]])
def test_a_line_alone_comes_back_as_one_line(default_client: TestClient, line: str) -> None:
    result = post(default_client, {"text": line, "on_low_quality": "omit"})
    assert "\n" not in result["translation"]
    assert len(result["sentences"]) == 1
