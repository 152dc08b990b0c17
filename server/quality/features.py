"""Per-sentence features of a translation: the scoring pass's signals, beam agreement,
copy, repetition and length. Pure functions (no torch): the estimator reads them.

The model-side features follow Fomicheva et al. 2020, "Unsupervised Quality Estimation
for Neural Machine Translation" (TACL): the mean token log-probability (their TP), its
spread (Sent-Std), the softmax entropy and the attention entropy; coverage follows Tu et
al. 2016 ("Modeling Coverage for NMT"): attention mass each source token received.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics.chrf import CHRF

from server.quality.signals import Signals

# The order of the estimator's inputs; a fitted estimator stores the names it was fitted on.
FEATURES: tuple[str, ...] = (
    "lp_mean", "lp_min", "lp_std", "low_prob_share", "entropy_mean", "attention_entropy",
    "uncovered", "overcovered", "length_ratio", "length_ratio_sq", "source_length",
    "copy_share", "repeated_ngrams", "beam_agreement", "beam_gap",
    "char_ratio", "source_chars", "beam_chrf",
)
# Beam features are missing for greedy decoding; the estimator imputes them.
BEAM_FEATURES = ("beam_agreement", "beam_gap", "beam_chrf")
# Only the scoring pass (server/quality/signals.py) gives these; every other feature comes
# from the search itself (lp_mean is the hypothesis' length-normalised score, equal to the
# pass's mean token log-probability within 1e-6). An estimator fitted on DECODE_FEATURES
# needs no pass: on the dev sets (leave-one-set-out, 150 sentences a set) it ranks as well
# as one with all 18 (mean within-set Spearman 0.527 against 0.525), at none of the pass's
# cost; char_ratio, source_chars and beam_chrf took it from 0.478 (the 8 before them).
PASS_FEATURES = ("lp_min", "lp_std", "low_prob_share", "entropy_mean", "attention_entropy",
                 "uncovered", "overcovered")
DECODE_FEATURES = tuple(name for name in FEATURES if name not in PASS_FEATURES)
LOW_PROB = math.log(0.1)  # a token the model gave less than a 10% chance
_WORD = re.compile(r"\w+", re.UNICODE)
_CHRF = CHRF()  # sacrebleu's defaults: the metric the estimator predicts


@dataclass(frozen=True)
class Candidate:
    """One decoded sentence as the features see it."""

    source: str  # the source text the engine saw
    output: str  # the decoded text
    source_ids: Sequence[int]  # ends with EOS when the backbone appends one
    output_ids: Sequence[int]  # no start, no EOS
    alternatives: Sequence[Sequence[int]] = ()  # other beam hypotheses, best first
    scores: Sequence[float] = ()  # the search's scores: this one's, then the alternatives'
    source_eos: bool = True  # source_ids end with the backbone's EOS (not a word)
    alternative_outputs: Sequence[str] = ()  # the alternatives' texts (beam_chrf reads them)


def features(candidate: Candidate, signals: Signals | None) -> dict[str, float]:
    """Every feature; without `signals` (no scoring pass) the PASS_FEATURES are NaN."""
    ids = candidate.source_ids
    src_len = max(1, len(ids) - 1 if candidate.source_eos and len(ids) > 1 else len(ids))
    ratio = math.log((len(candidate.output_ids) + 1) / (src_len + 1))
    found = dict.fromkeys(PASS_FEATURES, math.nan)
    found["lp_mean"] = candidate.scores[0] if candidate.scores else math.nan
    if signals is not None:
        found.update(_pass_features(signals, src_len))
    found.update({
        "length_ratio": ratio,
        "length_ratio_sq": ratio * ratio,
        "source_length": math.log(src_len),
        "copy_share": copy_share(candidate.source, candidate.output),
        "repeated_ngrams": repeated_ngrams(candidate.output_ids),
        "beam_agreement": math.nan,
        "beam_gap": math.nan,
        # chrF is a character score: the character length ratio tells a dropped or padded
        # output better than the token one (on the dev sets, leave-one-set-out, the mean
        # within-set Spearman rose from 0.506 to 0.523 with it alone)
        "char_ratio": math.log((len(candidate.output) + 1) / (len(candidate.source) + 1)),
        "source_chars": math.log(len(candidate.source) + 1),
        "beam_chrf": math.nan,
    })
    if candidate.alternatives:
        found["beam_agreement"] = sum(overlap(candidate.output_ids, alt) for alt in
                                      candidate.alternatives) / len(candidate.alternatives)
    if len(candidate.scores) > 1:
        found["beam_gap"] = candidate.scores[0] - candidate.scores[1]
    if candidate.alternative_outputs:
        found["beam_chrf"] = beam_chrf(candidate.output, candidate.alternative_outputs)
    return found


def _pass_features(signals: Signals, src_len: int) -> dict[str, float]:
    lps = signals.token_log_probs
    mean = sum(lps) / len(lps)
    coverage = signals.coverage
    return {
        "lp_mean": mean,
        "lp_min": min(lps),
        "lp_std": math.sqrt(sum((lp - mean) ** 2 for lp in lps) / len(lps)),
        "low_prob_share": sum(lp < LOW_PROB for lp in lps) / len(lps),
        "entropy_mean": sum(signals.token_entropies) / len(signals.token_entropies),
        "attention_entropy": signals.attention_entropy,
        "uncovered": sum(c < 0.3 for c in coverage) / src_len,
        "overcovered": sum(c > 2.5 for c in coverage) / src_len,
    }


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def copy_share(source: str, output: str) -> float:
    """Share of the output's words (of 3+ characters, not numbers) found in the source:
    near 1 when the output copies the source instead of translating it."""
    src = set(words(source))
    out = [w for w in words(output) if len(w) >= 3 and not w.isdigit()]
    if not out:
        return 0.0
    return sum(w in src for w in out) / len(out)


def repeated_ngrams(ids: Sequence[int], n: int = 3) -> float:
    """Share of the output's n-grams that repeat an earlier one (a loop scores high)."""
    grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def beam_chrf(output: str, alternatives: Sequence[str]) -> float:
    """Mean chrF / 100 of the beam's other hypotheses against the output: where the beam
    agrees on the characters, a reference is likelier to agree too (a consensus signal,
    as Fomicheva et al. 2020's lexical similarity of sampled translations, here from the
    beam the search kept anyway)."""
    total = sum(float(_CHRF.sentence_score(alt, [output]).score) for alt in alternatives)
    return total / (100 * len(alternatives))


def overlap(a: Sequence[int], b: Sequence[int]) -> float:
    """Token multiset F1 of two hypotheses (1: the same tokens)."""
    if not a and not b:
        return 1.0
    common = sum((Counter(a) & Counter(b)).values())
    return 2 * common / (len(a) + len(b))
