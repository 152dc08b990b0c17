"""A text's sentences as the engine's jobs: source ids with the output length each may
reach (413 for a sentence longer than the model reads)."""

from __future__ import annotations

from collections.abc import Sequence

from server.core.errors import TooLarge
from server.core.settings import DecodingSettings
from server.decoding.step_hooks import SentenceGuide
from server.engine.engine import Engine, Member, SentenceJob
from server.serving.requests import DecodingRequest


def max_length(engine: Engine, source: Sequence[int], request: DecodingRequest,
               decoding: DecodingSettings, *, field: str) -> int:
    """The most target tokens `source` may decode to (the request's own cap, else a
    ratio of its length), within the model's positions."""
    limit = engine.config.max_positions
    if len(source) > limit:
        raise TooLarge(f"a sentence of {len(source)} tokens exceeds the model's limit of "
                       f"{limit}; split it", field=field)
    if request.max_length is not None:
        return min(request.max_length, limit)
    return engine.max_length(len(source), ratio=decoding.length_ratio,
                             limit=decoding.max_length)


def sentence_jobs(engine: Engine, ids: Sequence[list[int]], members: tuple[Member, ...],
                  request: DecodingRequest, decoding: DecodingSettings, *, field: str,
                  guides: tuple[SentenceGuide, ...] = ()) -> list[SentenceJob]:
    """One job per encoded sentence of `ids` (each ending with EOS), carrying `guides`."""
    return [SentenceJob(source, members, max_length(engine, source, request, decoding,
                                                    field=field), guides=guides)
            for source in ids]
