"""Sentence splitting and rejoining (server/textproc/sentences.py), table-driven."""

from __future__ import annotations

import pytest

from server.routing.features import classifier_text
from server.textproc.sentences import Piece, join_pieces, sentences, split_text

SPLITS = [
    ("", []),
    ("   ", []),
    ("Hello world", ["Hello world"]),
    ("Hello world. How are you?", ["Hello world.", "How are you?"]),
    ("Stop! Go now.", ["Stop!", "Go now."]),
    ("Really?! Yes.", ["Really?!", "Yes."]),
    ("Wait... Then it came.", ["Wait...", "Then it came."]),
    ("It costs 3.5 euros. 2 items left.", ["It costs 3.5 euros.", "2 items left."]),
    ('He said "Go!" Then he left.', ['He said "Go!"', "Then he left."]),
    ('End of one. "Quoted start" here.', ["End of one.", '"Quoted start" here.']),
    ("(A note.) Next one.", ["(A note.)", "Next one."]),
    ("Dr. Smith is here. He waits.", ["Dr. Smith is here.", "He waits."]),
    ("See e.g. Article 5. Then stop.", ["See e.g. Article 5.", "Then stop."]),
    ("Use Fig. 3 and Art. 12 now.", ["Use Fig. 3 and Art. 12 now."]),
    ("J. R. R. Tolkien wrote it. Yes.", ["J. R. R. Tolkien wrote it.", "Yes."]),
    ("the end. lowercase goes on", ["the end. lowercase goes on"]),
    ("version 2.0.1 is out", ["version 2.0.1 is out"]),
    ("line one\nline two", ["line one", "line two"]),
    ("no stop at line end\nNext", ["no stop at line end", "Next"]),
    ("Para one.\n\nPara two.", ["Para one.", "Para two."]),
    ("Windows\r\nline", ["Windows", "line"]),
    ("Le patient va bien. Élodie aussi.", ["Le patient va bien.", "Élodie aussi."]),
]


@pytest.mark.parametrize(("text", "expected"), SPLITS)
def test_sentences_are_split(text: str, expected: list[str]) -> None:
    assert sentences(split_text(text)) == expected


@pytest.mark.parametrize(("text", "_expected"), SPLITS)
def test_pieces_concatenate_to_the_input(text: str, _expected: list[str]) -> None:
    assert "".join(piece.text for piece in split_text(text)) == text


LAYOUTS = [
    ("  Hello world.  ", "  <Hello world.>  "),
    ("A one. B two.", "<A one.> <B two.>"),
    ("A one.   B two.", "<A one.>   <B two.>"),
    ("Title\n\n  Body one. Body two.\n", "<Title>\n\n  <Body one.> <Body two.>\n"),
    ("\n\n", "\n\n"),
    (" \t ", " \t "),
    ("tab\tinside. Next", "<tab\tinside.> <Next>"),
    ("one\r\n\r\ntwo", "<one>\r\n\r\n<two>"),
]


@pytest.mark.parametrize(("text", "expected"), LAYOUTS)
def test_layout_survives_rejoining(text: str, expected: str) -> None:
    pieces = split_text(text)
    assert join_pieces(pieces, [f"<{s}>" for s in sentences(pieces)]) == expected


def test_whitespace_only_segments_are_not_translated() -> None:
    pieces = split_text("One.\n   \nTwo.")
    assert Piece("   ", False) in pieces
    assert sentences(pieces) == ["One.", "Two."]


def test_join_refuses_a_wrong_number_of_translations() -> None:
    pieces = split_text("One. Two.")
    with pytest.raises(ValueError, match="fewer"):
        join_pieces(pieces, ["1"])
    with pytest.raises(ValueError, match="more"):
        join_pieces(pieces, ["1", "2", "3"])


@pytest.mark.parametrize(("text", "expected"), [
    ("Hello, World!", "hello , world !"),
    ("  The  patient\ttakes\none tablet.  ", "the patient takes one tablet ."),
    ("L'état (membre)", "l ' état ( membre )"),
    ("", ""),
    ("3.5mg", "3 . 5mg"),
])
def test_classifier_text_is_one_normalised_line(text: str, expected: str) -> None:
    assert classifier_text(text) == expected
    assert "\n" not in classifier_text(text)
