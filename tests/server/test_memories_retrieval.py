"""Retrieval during decoding through HTTP on the tiny en->fr store: the pairs of a memory
in play that are like a sentence guide its decoding (the answer says how much they
weighed), a pair added a moment ago is among them, a domain's memory weighs in only on
text routed to its domain, and retrieval can be turned off."""

from __future__ import annotations

from pathlib import Path

from test_memories_api import LEAFLET, add, client_for, create, translate

TEXT = "Take three tablets a day with water."


def test_a_memory_in_play_guides_decoding_and_says_how_much(tmp_path: Path) -> None:
    with client_for(tmp_path) as client:
        create(client, "leaflets")
        assert "retrieval" not in translate(client, TEXT, memory="leaflets")  # empty
        for source, target in LEAFLET:
            add(client, "leaflets", source, target)
        answer = translate(client, TEXT, memory="leaflets")
        shown = answer["retrieval"]
        assert shown["sentences"] == 1 and shown["neighbours"] >= 2
        assert shown["steps"] > 0 and 0 <= shown["steps_on"] <= shown["steps"]
        assert 0.0 <= shown["mean_weight"] <= 1.0
        off = translate(client, TEXT, memory=False)
        assert "retrieval" not in off and "matches" not in off
        unlike = translate(client, "Zebras rarely sing.", memory="leaflets")
        assert "retrieval" not in unlike  # no pair like it: nothing retrieved


def test_a_domains_memory_weighs_in_only_on_text_routed_to_it(tmp_path: Path) -> None:
    with client_for(tmp_path) as client:
        create(client, "medical-tm", domain="medical")
        for source, target in LEAFLET:
            add(client, "medical-tm", source, target)
        assert translate(client, TEXT, domain="medical")["retrieval"]["neighbours"] >= 2
        assert "retrieval" not in translate(client, TEXT, domain="law")


def test_retrieval_can_be_turned_off(tmp_path: Path) -> None:
    with client_for(tmp_path, memories={"retrieval": {"enabled": False}}) as client:
        create(client, "leaflets")
        for source, target in LEAFLET:
            add(client, "leaflets", source, target)
        answer = translate(client, TEXT, memory="leaflets")
        assert "retrieval" not in answer and answer["matches"]
