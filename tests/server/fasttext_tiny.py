"""A tiny fastText supervised model written directly in fastText's binary format.

Why not `fasttext.train_supervised`: the installed fasttext-numpy2 0.10.4 wheel fails to
train on this machine (`RuntimeError: Encountered NaN.` for any learning rate, even on a
two-line file, and non-deterministically), while loading and predicting work. Writing
the weights ourselves also makes every posterior exact and deterministic.

The model: one hidden dimension per domain; a word's input row is `scale` in the
dimensions of the domains it is a keyword of (0 elsewhere), the output matrix is the
identity, so the posterior is softmax(mean of the words' rows). A word shared by all
domains gives a uniform posterior.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from server.routing.features import HashedFeatures, feature_line

MAGIC = 793712314
VERSION = 12
LOSS_SOFTMAX = 3
MODEL_SUPERVISED = 3


def classifier_bytes(keywords: Mapping[str, Sequence[str]], *, shared: Sequence[str] = (),
                     scale: float = 8.0) -> bytes:
    """fastText `.bin` bytes; `keywords` maps domain -> its words; `shared` words belong
    to every domain (uniform posterior)."""
    labels = list(keywords)
    rows: dict[str, list[float]] = {}
    for index, domain in enumerate(labels):
        for word in keywords[domain]:
            rows.setdefault(word, [0.0] * len(labels))[index] = scale
    for word in shared:
        rows[word] = [scale] * len(labels)
    words = list(rows)
    dim = len(labels)
    out = struct.pack("<ii", MAGIC, VERSION)
    # args: dim ws epoch minCount neg wordNgrams loss model bucket minn maxn lrUpdateRate t
    out += struct.pack("<12id", dim, 5, 5, 1, 5, 1, LOSS_SOFTMAX, MODEL_SUPERVISED, 0, 0, 0,
                       100, 1e-4)
    entries = [(w, 0) for w in words] + [(f"__label__{d}", 1) for d in labels]
    out += struct.pack("<iiiqq", len(entries), len(words), len(labels), len(entries), -1)
    for text, kind in entries:
        out += text.encode() + b"\0" + struct.pack("<qb", 1, kind)
    out += struct.pack("<?", False)  # input matrix not quantized
    out += _matrix([rows[w] for w in words])
    out += struct.pack("<?", False)  # output matrix not quantized
    out += _matrix([[1.0 if i == j else 0.0 for j in range(dim)] for i in range(dim)])
    return out


def hashed_classifier_bytes(keywords: Mapping[str, Sequence[str]],
                            features: HashedFeatures | None = None, **options: float) -> bytes:
    """`classifier_bytes` of a model that reads hashed `features` (the default ones): each
    keyword (one word) is known by its number, as a router trained on features knows it."""
    of = (features or HashedFeatures()).of
    return classifier_bytes({domain: [feature_line(of(word)) for word in words]
                             for domain, words in keywords.items()}, **options)


def _matrix(rows: list[list[float]]) -> bytes:
    n = len(rows[0]) if rows else 0
    flat = [value for row in rows for value in row]
    return struct.pack("<qq", len(rows), n) + struct.pack(f"<{len(flat)}f", *flat)
