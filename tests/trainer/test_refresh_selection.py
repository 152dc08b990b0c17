"""Which corrections a refresh trains on (near duplicates, dev-set sentences, one key's
share, the held-back part) and how its gate decides, on real correction records."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from model_store.correction_rows import CorrectionRecord
from server.routing.features import HashedFeatures
from trainer.corrections.correction_set import explain_empty, near_key, select_corrections
from trainer.corrections.refresh_gate import RefreshGate, chrf_gain_interval
from trainer.corrections.refresh_router import corrected_examples
from trainer.jobs.refresh_settings import RefreshSettings
from trainer.routers.features import projected
from trainer.training.evaluate import Scores, score

START = datetime(2026, 11, 1, tzinfo=UTC)
SETTINGS = RefreshSettings()


def record(number: int, source: str, corrected: str, key: str | None,
           status: str = "accepted") -> CorrectionRecord:
    return CorrectionRecord(
        id=f"c{number:05d}", source=source, machine=None, corrected=corrected,
        domain="medical", routed=None, direction="en-fr", backbone="b", key_id=key,
        key_name=key, status=status,  # type: ignore[arg-type]
        used_in=None, created_at=START + timedelta(seconds=number), reviewed_at=None)


def honest(count: int, key: str, start: int = 0) -> list[CorrectionRecord]:
    return [record(start + i, f"take tablet number {start + i}",
                   f"prendre le comprimé numéro {start + i}", key) for i in range(count)]


def test_near_duplicates_are_one_correction_and_the_most_supported_wins() -> None:
    records = [record(1, "Take one tablet.", "Prendre un comprimé.", "a"),
               record(2, "take one  tablet", "prendre un comprimé", "b"),
               record(3, "TAKE ONE TABLET!", "Prenez une gélule.", "c"),
               record(4, "Shake well", "Bien agiter", "a")]
    chosen = select_corrections(records, dev_sources=[], settings=SETTINGS, seed=1)
    kept = chosen.train + chosen.held_out
    assert sorted(r.id for r in kept) == ["c00002", "c00004"]  # a + b agree; the newest
    assert sorted(r.id for r in chosen.merged) == ["c00001", "c00003"]
    assert near_key("Take one tablet.") == near_key("take one  tablet") == "take one tablet"
    # merged ones are marked used with the refresh: they are represented by the winner
    assert len(chosen.used()) == 4


def test_corrections_of_dev_sentences_are_left_out() -> None:
    records = honest(10, "a") + honest(9, "b", start=10)
    chosen = select_corrections(records, dev_sources=["Take tablet number 3."],
                                settings=SETTINGS, seed=1)
    assert [r.id for r in chosen.in_dev] == ["c00003"]
    assert len(chosen.train) + len(chosen.held_out) == 18 and not chosen.over_share


def test_one_key_alone_trains_nothing() -> None:
    chosen = select_corrections(honest(1000, "flipper"), dev_sources=[], settings=SETTINGS,
                                seed=1)
    assert not chosen.train and not chosen.held_out and len(chosen.over_share) == 1000
    assert "1000 left out because one API key may send at most 50%" in explain_empty(
        chosen, SETTINGS)


@pytest.mark.parametrize("share", [0.5, 0.3, 0.1])
def test_no_key_holds_more_than_its_share(share: float) -> None:
    records = honest(1000, "flipper") + honest(40, "a", 1000) + honest(30, "b", 2000) + \
        honest(30, "c", 3000)
    chosen = select_corrections(records, dev_sources=[],
                                settings=RefreshSettings(max_key_share=share), seed=1)
    kept = chosen.train + chosen.held_out
    for key in ("flipper", "a", "b", "c"):
        assert sum(r.key_id == key for r in kept) <= share * len(kept) + 1e-9
    assert len(kept) + len(chosen.over_share) == 1100
    # the oldest of a capped key are the ones kept
    flipper = sorted(r.id for r in kept if r.key_id == "flipper")
    assert flipper == [f"c{i:05d}" for i in range(len(flipper))]


def test_admin_approved_anonymous_corrections_are_not_capped() -> None:
    approved = [record(i, f"shake bottle {i}", f"agiter le flacon {i}", None, "approved")
                for i in range(50)]
    chosen = select_corrections(approved + honest(50, "a", 100), dev_sources=[],
                                settings=SETTINGS, seed=1)
    assert not chosen.over_share and len(chosen.train) + len(chosen.held_out) == 100
    assert len(chosen.held_out) == 20  # held_out_fraction 0.2


REFERENCES = [f"Prendre {n} comprimés par jour avec un verre d'eau." for n in range(40)]
# The served module drops the article; a worse one also gets the drug form wrong, on most
# sentences; a noisy one is worse on 2 of 40 and better on 2 (20 sentences of corpus BLEU
# move by points like this).
DROPPED = [r.replace("avec un", "avec") for r in REFERENCES]
WRONG = [r.replace("comprimés", "gélules") if i % 4 else r for i, r in enumerate(DROPPED)]
NOISY = [REFERENCES[i] if i in (0, 1) else "Prendre." if i in (2, 3) else r
         for i, r in enumerate(DROPPED)]


def gate(dev: tuple[float, float], held: Sequence[str], served: Sequence[str] = DROPPED,
         margin: float = 0.5, gain: float = 0.0) -> RefreshGate:
    interval = chrf_gain_interval(served, held, REFERENCES)
    return RefreshGate(Scores(dev[0], 50.0), Scores(dev[1], 50.0), score(served, REFERENCES),
                       score(held, REFERENCES), interval, len(REFERENCES), margin, gain)


def test_the_gate_wants_dev_kept_and_the_held_back_corrections_not_significantly_worse(
        ) -> None:
    assert gate((30.0, 29.6), REFERENCES).passed
    poisoned = gate((30.0, 28.0), REFERENCES)  # learnt a wrong term the dev set knows
    assert not poisoned.passed
    assert poisoned.refusal().startswith("refresh gate: dev BLEU 28.00 against the served "
                                         "module's 30.00 (it may lose at most 0.5)")
    worse = gate((30.0, 30.0), WRONG)
    low, high = worse.held_chrf_interval
    assert high < 0 and not worse.passed
    assert "on the 40 held-back corrections chrF went from" in worse.refusal()
    # a few sentences up and a few down: the corpus scores move, the interval straddles 0
    noisy = gate((30.0, 30.0), NOISY)
    assert noisy.held_chrf_interval[0] < 0 < noisy.held_chrf_interval[1] and noisy.passed
    unchanged = gate((30.0, 30.0), DROPPED)
    assert unchanged.held_chrf_interval == (0.0, 0.0) and unchanged.passed
    # demanding that a gain of 2 chrF be plausible
    assert not gate((30.0, 30.0), NOISY, gain=2.0).passed
    assert gate((30.0, 30.0), REFERENCES, gain=2.0).passed


def test_the_bootstrap_interval_is_seeded_and_holds_the_corpus_gain() -> None:
    corpus_gain = score(REFERENCES, REFERENCES).chrf - score(DROPPED, REFERENCES).chrf
    low, high = chrf_gain_interval(DROPPED, REFERENCES, REFERENCES, seed=3)
    assert low <= corpus_gain <= high and low > 0
    assert chrf_gain_interval(DROPPED, REFERENCES, REFERENCES, seed=3) == (low, high)


def test_corrections_that_contradict_the_domains_own_pairs_are_left_out() -> None:
    own = [("Take one tablet a day.", "Prendre un comprimé par jour."),
           ("Shake well.", "Bien agiter.")]
    flipped = [record(1, "take one tablet a day", "Prendre une gélule par jour.", "a"),
               record(2, "Shake well.", "Bien agiter !", "b"),  # the same up to punctuation
               record(3, "Store below 25 C.", "Ne pas conserver au-dessus de 25 C.", "c")]
    chosen = select_corrections(flipped, dev_sources=[], settings=SETTINGS, seed=1, own=own)
    assert [r.id for r in chosen.contradicting] == ["c00001"]
    assert sorted(r.id for r in chosen.train + chosen.held_out) == ["c00002", "c00003"]
    assert chosen.summary()["contradict_own_data"] == 1
    assert "contradict the domain's own training pairs" in explain_empty(chosen, SETTINGS)


def test_corrected_sources_join_the_chosen_domain_and_leave_other_labels() -> None:
    of = HashedFeatures().of
    stored = [("it", of("open the file")), ("medical", of("take one tablet")),
              ("religion", of("blessed are the meek")), ("it", of("close the window"))]
    sources = ["open the file", "blessed are the meek", "pray every day", "pray every day", " "]
    examples = corrected_examples(stored, "religion", [of(s) for s in sources])
    # the it example the corrector put under religion moves; religion's own stays once;
    # a new source is added once; a blank one never
    assert examples == [("medical", of("take one tablet")),
                        ("religion", of("blessed are the meek")),
                        ("it", of("close the window")), ("religion", of("open the file")),
                        ("religion", of("pray every day"))]


def test_a_source_finds_its_stored_example_whose_rare_features_were_dropped() -> None:
    """A stored example holds only the features frequent enough to keep: a corrected source
    is matched by its own features cut to those the store knows."""
    of = HashedFeatures().of
    common = of("take the tablet")
    stored = [("medical", common)] * 2 + [("it", of("take the tablet"))]
    known = {number for _, bag in stored for number in bag}
    source = of("take the tablet zyprexa")  # "zyprexa" was too rare to be stored
    assert source != common and projected(source, known) == common
    examples = corrected_examples(stored, "religion", [source])
    assert [label for label, _ in examples] == ["religion"]
    assert examples == [("religion", source)]
