"""ModernMT's `/translate` and `/context-vector` on the native translation path: `hints`
name memories by id (our `memory` option), a context vector's memories weigh their
domains (a memory that belongs to a domain puts the request's mixture weight on it; a
standalone one is put in play), `glossaries` name the memories whose glossary applies.
Answers carry ModernMT's fields plus ours (`match`, `matches`: what the memories in play
answered)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from server.api.modernmt.errors import bad_request
from server.api.modernmt.memories import ModernMTMemories, glossary_name, pair_of
from server.api.modernmt.params import Params, context_vector, memory_ids
from server.api.schemas_memories import match_info
from server.memories.book import MemoryChoice
from server.routing.policy import DomainSpec
from server.serving.directions import Direction, Directions
from server.serving.glossaries import GlossaryChoice
from server.serving.requests import DecodingRequest, Item, ItemResult
from server.serving.tenant_view import routable
from server.textproc.languages import Detection

AUTO = "auto"


def language(code: str | None) -> str | None:
    """ModernMT's codes carry regions and scripts (`en-US`, `pt-PT`, `zh_Hans`); ours
    are the language alone."""
    if code is None:
        return None
    return code.strip().replace("_", "-").split("-")[0].lower() or None


@dataclass(frozen=True)
class Request:
    texts: list[str]
    batch: bool
    direction: Direction
    detected: Detection | None
    items: list[Item]


async def prepare(params: Params, directions: Directions,
                  memories: ModernMTMemories) -> Request:
    texts, batch = params.texts("q")
    target = language(params.text("target", required=True))
    source = language(params.text("source")) or AUTO
    hinted = memory_ids(params.text("hints"))  # read before any detection runs
    vector = context_vector(params.text("context_vector"))
    choice = await directions.choose(source, target, texts)
    direction = choice.direction
    domain, standalone = await asyncio.to_thread(_routing, memories, direction, vector)
    names = await asyncio.to_thread(memories.in_direction, direction, hinted)
    memory = MemoryChoice(names=tuple(dict.fromkeys([*names, *standalone])),
                          field="hints")
    glossary = await asyncio.to_thread(_glossary, params, memories, direction)
    items = [Item(text, domain, text_field=f"q[{i}]" if batch else "q", memory=memory,
                  glossary=glossary) for i, text in enumerate(texts)]
    return Request(texts, batch, direction, choice.detected, items)


def _routing(memories: ModernMTMemories, direction: Direction,
             vector: dict[int, float]) -> tuple[DomainSpec, list[str]]:
    """The domain mixture a context vector asks for (None: the router decides), and the
    standalone memories it names."""
    weights: dict[str, float] = {}
    standalone: list[str] = []
    for memory_id, weight in vector.items():
        found = memories.get(memory_id)
        if found.direction is not direction:
            continue
        if found.record.domain is not None:
            weights[found.record.domain] = weights.get(found.record.domain, 0.0) + weight
        elif weight > 0:
            standalone.append(found.record.name)
    weights = {name: w for name, w in weights.items() if w > 0}
    if len(weights) == 1:  # one domain: that domain's module alone
        return next(iter(weights)), standalone
    return (weights or None), standalone


def _glossary(params: Params, memories: ModernMTMemories,
              direction: Direction) -> GlossaryChoice:
    """The glossary of this direction's languages of the memory named in `glossaries`
    (a memory without one: nothing to apply; an unknown memory: 404)."""
    names = []
    for memory_id in memory_ids(params.text("glossaries"), "glossaries"):
        pair = pair_of(direction, memories.get(memory_id))
        name = None if pair is None else glossary_name(memory_id, pair)
        if name is not None and direction.glossaries.registry.get_glossary(name) is not None:
            names.append(name)
    if len(names) > 1:
        raise bad_request("one memory's glossary per request")
    if not names:
        return GlossaryChoice()
    return GlossaryChoice(glossary_id=names[0], id_field="glossaries")


async def translate(request: Request) -> list[ItemResult]:
    return await request.direction.translator.translate(request.items, DecodingRequest())


def answer(request: Request, results: list[ItemResult]) -> Any:
    answers = []
    for text, result in zip(request.texts, results, strict=True):
        found: dict[str, Any] = {"translation": result.translation,
                                 "characters": len(text), "billedCharacters": 0,
                                 "domain": result.decision.domain}
        if request.detected is not None:
            found["detectedLanguage"] = request.detected.language
        if result.memory is not None:
            use = result.memory
            found["match"] = match_info(use.match).model_dump() if use.match else None
            found["matches"] = [match_info(m).model_dump() for m in use.matches]
        answers.append(found)
    return answers if request.batch else answers[0]


def vector_of(memories: ModernMTMemories, direction: Direction, text: str,
              hints: list[int], limit: int) -> str:
    """The context vector of `text`: each memory of a domain weighs what the router's
    classifier gives its domain; a standalone memory in `hints`, the best fuzzy match
    of the text in it (score / 100). Best first, at most `limit`, as "id:weight"."""
    classifier = routable(direction.runtime.state).classifier  # the key's tenant's
    posteriors = classifier.posteriors(text) if classifier is not None else {}
    hinted = set(hints)
    weights: dict[int, float] = {}
    book = direction.memories
    if book is None:  # memories are off
        return ""
    for record in memories.all():
        if record.backbone != book.backbone:  # another direction's
            continue
        if record.domain is not None and posteriors.get(record.domain, 0.0) > 0:
            weights[record.id] = posteriors[record.domain]
        elif record.domain is None and record.id in hinted:
            best = book.fuzzy(book.in_play(MemoryChoice(names=(record.name,)), None), text)
            if best:
                weights[record.id] = best[0].score / 100
    ranked = sorted(weights.items(), key=lambda item: -item[1])[:limit]
    return ",".join(f"{memory_id}:{weight:.3f}" for memory_id, weight in ranked if weight > 0)
