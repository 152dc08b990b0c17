"""The gate of a refresh: the refreshed module against the module it refreshes (not the
plain backbone), on the domain's dev set AND on the held-back corrections.

Published only when neither got worse:
- dev: the BLEU is not lower by more than `gate_margin_bleu` (a correction set that
  teaches the module something false, e.g. one drug name for another, or targets that
  are fluent but of other sentences, costs it dev BLEU wherever the dev set says
  otherwise);
- the held-back corrections: a few dozen sentences, whose corpus BLEU moves by points
  from one sentence's 4-grams (an honest refresh of 100 simulated corrections lost 2.6
  BLEU on its 20 held back while gaining 0.2 BLEU on 100 unseen test lines:
  benchmarks/results/corrections.md, first version). So the check is chrF (character
  n-grams: stable on short segments and UI strings where BLEU is often 0) with paired
  bootstrap resampling (Koehn 2004): the same held-back sentences are drawn with
  replacement for both modules, `RESAMPLES` times, and the refresh is refused when the
  upper end of the 95% interval of its chrF gain is below `min_held_out_gain_chrf`
  (default 0: refused when it is significantly worse; a positive value: refused unless
  a gain that large is within the interval).
Both modules are scored with the weights that are (or would be) served.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sacrebleu.metrics.chrf import CHRF

from contract.tsv import Pair
from server.engine.families import Params, get_family
from server.engine.single import SingleModuleHooks
from trainer.jobs.domain_job import JobBackbone
from trainer.training.evaluate import Scores, evaluate_texts

RESAMPLES = 1000
LEVEL = 0.95
_CHRF = CHRF()  # sacrebleu's defaults, as trainer.training.evaluate.score computes corpus chrF


def chrf_gain_interval(served: Sequence[str], refreshed: Sequence[str],
                       references: Sequence[str], *, seed: int = 0) -> tuple[float, float]:
    """The central `LEVEL` interval of corpus chrF(refreshed) - chrF(served) over paired
    bootstrap resamples of the sentences."""
    if not references:
        return (0.0, 0.0)
    refs = [list(references)]
    before = np.asarray(_CHRF._extract_corpus_statistics(list(served), refs), dtype=np.int64)
    after = np.asarray(_CHRF._extract_corpus_statistics(list(refreshed), refs),
                       dtype=np.int64)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(references), size=(RESAMPLES, len(references)))
    gains = [_corpus_chrf(after[d]) - _corpus_chrf(before[d]) for d in draws]
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(gains, [tail, 100 - tail])
    return (float(low), float(high))


def _corpus_chrf(statistics: np.ndarray) -> float:
    return float(_CHRF._compute_score_from_stats([int(v) for v in statistics.sum(0)]).score)


@dataclass(frozen=True)
class RefreshGate:
    dev_before: Scores
    dev_after: Scores
    held_before: Scores
    held_after: Scores
    held_chrf_interval: tuple[float, float]  # 95% interval of the held-back chrF gain
    held_count: int
    margin_bleu: float
    min_gain_chrf: float

    @property
    def dev_delta(self) -> float:
        return self.dev_after.bleu - self.dev_before.bleu

    @property
    def held_delta(self) -> float:
        return self.held_after.bleu - self.held_before.bleu

    @property
    def held_chrf_delta(self) -> float:
        return self.held_after.chrf - self.held_before.chrf

    @property
    def dev_ok(self) -> bool:
        return self.dev_delta >= -self.margin_bleu

    @property
    def held_ok(self) -> bool:
        return self.held_chrf_interval[1] >= self.min_gain_chrf

    @property
    def passed(self) -> bool:
        return self.dev_ok and self.held_ok

    def as_scores(self) -> dict[str, Any]:
        low, high = self.held_chrf_interval
        return {"dev": {"served": self.dev_before.as_dict(), "refreshed": self.dev_after.as_dict(),
                        "delta_bleu": round(self.dev_delta, 2)},
                "held_out_corrections": {
                    "served": self.held_before.as_dict(), "refreshed": self.held_after.as_dict(),
                    "sentences": self.held_count,
                    "delta_bleu": round(self.held_delta, 2),
                    "delta_chrf": round(self.held_chrf_delta, 2),
                    "delta_chrf_95": [round(low, 2), round(high, 2)]},
                "margin_bleu": self.margin_bleu, "min_gain_chrf": self.min_gain_chrf,
                "gate": "passed" if self.passed else "refused"}

    def refusal(self) -> str:
        reasons = []
        if not self.dev_ok:
            reasons.append(f"dev BLEU {self.dev_after.bleu:.2f} against the served module's "
                           f"{self.dev_before.bleu:.2f} (it may lose at most "
                           f"{self.margin_bleu:g})")
        if not self.held_ok:
            low, high = self.held_chrf_interval
            reasons.append(f"on the {self.held_count} held-back corrections chrF went from "
                           f"{self.held_before.chrf:.2f} to {self.held_after.chrf:.2f} (95% "
                           f"interval of the gain {low:+.2f} to {high:+.2f}; its upper end "
                           f"must be at least {self.min_gain_chrf:g}) and BLEU from "
                           f"{self.held_before.bleu:.2f} to {self.held_after.bleu:.2f}")
        return "refresh gate: " + "; ".join(reasons)


def refresh_gate(backbone: JobBackbone, family: str, served: Params, refreshed: Params, *,
                 dev: Sequence[Pair], held_out: Sequence[Pair], margin_bleu: float,
                 min_gain_chrf: float, seed: int = 0) -> RefreshGate:
    spec = get_family(family)

    def scored(params: Params, pairs: Sequence[Pair]) -> tuple[Scores, list[str]]:
        hooks = SingleModuleHooks(spec, params)
        return evaluate_texts(backbone.model, backbone.source, backbone.target, pairs,
                              hooks=hooks)

    (held_before, served_held), (held_after, refreshed_held) = (
        scored(served, held_out), scored(refreshed, held_out))
    interval = chrf_gain_interval(served_held, refreshed_held, [t for _, t in held_out],
                                  seed=seed)
    return RefreshGate(scored(served, dev)[0], scored(refreshed, dev)[0], held_before,
                       held_after, interval, len(held_out), margin_bleu, min_gain_chrf)
