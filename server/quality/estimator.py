"""The calibrated quality estimator: a ridge regression from a sentence's features
(server/quality/features.py) to its expected chrF / 100, clipped to [0, 1].

Why linear: the features are few and each moves quality one way; a linear model fitted
on a few hundred dev sentences per domain ranks as well as anything richer would on that
little data, is read in one glance, and costs a dot product per sentence. It is stored as
JSON beside the backbone it was fitted for (its fingerprint inside), with the default
flagging threshold chosen on the same dev sets. The file is xz-compressed JSON: the fitting
rows it keeps for refits are 93% of its bytes and shrink 15x (plain JSON is read as well).
"""

from __future__ import annotations

import json
import lzma
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from server.quality.features import FEATURES

FORMAT = 1
XZ_MAGIC = b"\xfd7zXZ\x00"


class EstimatorError(ValueError):
    """An estimator file that cannot be used (every problem listed)."""


@dataclass(frozen=True)
class Estimator:
    features: tuple[str, ...]
    mean: tuple[float, ...]  # imputed for a missing feature, subtracted before scaling
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float  # default min_quality: below it a sentence is flagged
    backbone_fingerprint: str | None = None  # None: not tied to one backbone (the prior)
    fitted_on: dict[str, Any] = field(default_factory=dict)  # data summary, dev metrics

    def predict(self, found: Mapping[str, float]) -> float:
        total = self.bias
        for name, mean, scale, weight in zip(self.features, self.mean, self.scale,
                                             self.weights, strict=True):
            value = found.get(name, math.nan)
            if not math.isfinite(value):
                value = mean
            total += weight * (value - mean) / scale
        return min(1.0, max(0.0, total))

    def to_json(self) -> str:
        body = {"format": FORMAT, **asdict(self)}
        return json.dumps(body, indent=1, sort_keys=True) + "\n"

    def to_file_bytes(self) -> bytes:
        """What an estimator file holds: the JSON, xz-compressed."""
        return lzma.compress(self.to_json().encode("utf-8"), preset=9)

    @classmethod
    def from_json(cls, text: str | bytes) -> Estimator:
        """From the JSON, or from an estimator file's bytes (xz-compressed JSON)."""
        if isinstance(text, bytes) and text.startswith(XZ_MAGIC):
            try:
                text = lzma.decompress(text)
            except lzma.LZMAError as error:
                raise EstimatorError(f"not an xz-compressed estimator: {error}") from None
        try:
            body = json.loads(text)
        except json.JSONDecodeError as error:
            raise EstimatorError(f"not JSON: {error}") from None
        if not isinstance(body, dict):
            raise EstimatorError("the estimator file must hold a JSON object")
        problems: list[str] = []
        if body.get("format") != FORMAT:
            problems.append(f"format {body.get('format')!r}, expected {FORMAT}")
        names = body.get("features")
        if not isinstance(names, list) or not names:
            problems.append("features: a non-empty list of feature names is required")
            names = []
        unknown = [n for n in names if n not in FEATURES]
        if unknown:
            problems.append(f"unknown features {unknown}; known: {list(FEATURES)}")
        for key in ("mean", "scale", "weights"):
            values = body.get(key)
            if not isinstance(values, list) or len(values) != len(names):
                problems.append(f"{key}: a list of {len(names)} numbers is required")
        if any(not isinstance(s, int | float) or s <= 0 for s in body.get("scale") or []):
            problems.append("scale: every value must be > 0")
        for key in ("bias", "threshold"):
            if not isinstance(body.get(key), int | float):
                problems.append(f"{key}: a number is required")
        if problems:
            raise EstimatorError("invalid quality estimator: " + "; ".join(problems))
        return cls(tuple(names), tuple(map(float, body["mean"])),
                   tuple(map(float, body["scale"])), tuple(map(float, body["weights"])),
                   float(body["bias"]), float(body["threshold"]),
                   body.get("backbone_fingerprint"), dict(body.get("fitted_on") or {}))


# Without a fitted estimator (a backbone nobody fitted one for): the mean token
# log-probability alone, the strongest single unsupervised signal in Fomicheva et al.
# 2020, mapped linearly (1 + 0.4 lp_mean: a model sure of every token scores 1, a mean
# token probability of 8% scores 0); the threshold flags a mean probability under ~29%.
PRIOR = Estimator(features=("lp_mean",), mean=(0.0,), scale=(1.0,), weights=(0.4,),
                  bias=1.0, threshold=0.5, fitted_on={"prior": "1 + 0.4 * lp_mean"})


def fit(rows: Sequence[Mapping[str, float]], targets: Sequence[float], *,
        ridge: float = 1.0, names: Sequence[str] = FEATURES) -> Estimator:
    """Least squares with an L2 penalty on standardised features; `targets` in [0, 1]."""
    if len(rows) != len(targets) or len(rows) < 2:
        raise ValueError(f"need at least 2 rows with one target each (got {len(rows)} rows, "
                         f"{len(targets)} targets)")
    matrix = np.array([[row.get(n, math.nan) for n in names] for row in rows], dtype=float)
    mean = np.nanmean(np.where(np.isfinite(matrix), matrix, np.nan), axis=0)
    mean = np.where(np.isfinite(mean), mean, 0.0)
    matrix = np.where(np.isfinite(matrix), matrix, mean)
    scale = matrix.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    x = (matrix - mean) / scale
    y = np.asarray(targets, dtype=float)
    bias = float(y.mean())
    weights = np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ (y - bias))
    return Estimator(tuple(names), tuple(mean.tolist()), tuple(scale.tolist()),
                     tuple(weights.tolist()), bias, threshold=0.0)
