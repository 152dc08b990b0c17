"""The hold / retire policy of served module versions, step by step."""

from __future__ import annotations

from server.serving.holds import ModuleHolds
from server.serving.state import DomainEntry, ServingState, parse_module_id


def test_a_retired_version_is_removed_after_its_last_holder() -> None:
    holds = ModuleHolds()
    assert holds.hold(["law@1"], served={"law@1"})
    holds.replace({"law@1"}, {"law@2"})  # v2 replaces v1 while a request holds v1
    assert holds.take_idle() == []
    assert holds.hold(["law@1"], served={"law@2"})  # retired, still live
    assert holds.in_flight("law") == ["law@1"]
    assert holds.release(["law@1"]) is False  # one holder left
    assert holds.release(["law@1"]) is True
    assert holds.take_idle() == ["law@1"]
    assert not holds.hold(["law@1"], served={"law@2"})  # gone: the caller routes again
    assert holds.in_flight("law") == []


def test_a_version_served_again_is_not_retired() -> None:
    holds = ModuleHolds()
    holds.replace({"law@1"}, {"law@2"})
    holds.replace({"law@2"}, {"law@1"})  # a quick rollback
    assert holds.take_idle() == ["law@2"]
    holds.replace({"law@1"}, set())
    holds.replace(set(), {"law@1"})
    assert holds.take_idle() == []


def test_state_names_its_mixtures_by_capability() -> None:
    state = ServingState({"law": DomainEntry("law", 1, "adapter", 10),
                          "mix": DomainEntry("mix", 2, "mixing", 99, mixes_domains=True)})
    assert state.mixtures() == {"mix"}
    assert state.module_ids() == {"law@1", "mix@2"}
    assert parse_module_id("mix@2") == ("mix", 2)
