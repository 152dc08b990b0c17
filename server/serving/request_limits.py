"""A request's limits: its size (items, characters), its decoding options, the caps on its
sentences and source tokens, and the domains it may name (not broken, a mixture where the
request needs one). Each check raises the error that says what is wrong and what is
allowed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from contract.families import mixture_families
from server.core.errors import InvalidInput, NotReady, TooLarge
from server.core.settings import DecodingSettings, LimitSettings
from server.decoding.search import SearchOptions
from server.serving.requests import DecodingRequest, Item, Prepared


def check_limits(items: Sequence[Item], limits: LimitSettings) -> None:
    """413 for too many items, too long a text, too many characters in the request."""
    if len(items) > limits.max_batch_items:
        raise TooLarge(f"{len(items)} items; at most {limits.max_batch_items} per request",
                       field="items")
    for item in items:
        if len(item.text) > limits.max_text_chars:
            raise TooLarge(f"text of {len(item.text)} characters; at most "
                           f"{limits.max_text_chars}", field=item.text_field)
    total = sum(len(item.text) for item in items)
    if total > limits.max_request_chars:
        raise TooLarge(f"{total} characters in the request; at most "
                       f"{limits.max_request_chars}",
                       field="items" if len(items) > 1 else items[0].text_field)


def search_options(request: DecodingRequest, decoding: DecodingSettings) -> SearchOptions:
    """The search a request asked for, within the server's limits (422 beyond them)."""
    beam = request.beam_size or max(decoding.beam_size, request.n_best)
    if beam > decoding.max_beam_size:
        field = "options.beam_size" if request.beam_size else "options.n_best"
        raise InvalidInput(f"beam size {beam} exceeds the limit {decoding.max_beam_size}",
                           field=field)
    if request.n_best > beam:
        raise InvalidInput(f"n_best ({request.n_best}) cannot exceed beam_size ({beam})",
                           field="options.n_best")
    if request.max_length is not None and request.max_length > decoding.max_length:
        raise InvalidInput(f"max_length {request.max_length} exceeds the limit "
                           f"{decoding.max_length}", field="options.max_length")
    return SearchOptions(beam_size=beam, n_best=request.n_best)


class RequestCaps:
    """Running totals of one request's sentences and source tokens against their caps."""

    def __init__(self, limits: LimitSettings) -> None:
        self.limits = limits
        self.sentences = 0
        self.tokens = 0

    def add_sentences(self, count: int, *, field: str) -> None:
        self.check_sentences(count, field=field)
        self.sentences += count

    def check_sentences(self, count: int, *, field: str) -> None:
        """413 when `count` more sentences would pass the cap (nothing is added)."""
        total = self.sentences + count
        if total > self.limits.max_request_sentences:
            raise TooLarge(f"the request has more than {self.limits.max_request_sentences} "
                           f"sentences ({total} so far; "
                           "NMT_LIMITS__MAX_REQUEST_SENTENCES)", field=field)

    def add_tokens(self, count: int, *, field: str) -> None:
        self.tokens += count
        if self.tokens > self.limits.max_request_tokens:
            raise TooLarge(f"the request has more than {self.limits.max_request_tokens} "
                           f"source tokens ({self.tokens} so far; "
                           "NMT_LIMITS__MAX_REQUEST_TOKENS)", field=field)


def check_not_broken(item: Item, broken: Mapping[str, tuple[int, str]]) -> None:
    """503 naming the domain and the reason when a request names a broken domain (one whose
    module failed to load); every other domain keeps serving."""
    spec = item.domain
    named = [spec] if isinstance(spec, str) else list(spec) if spec is not None else []
    for name in named:
        if name in broken:
            version, problem = broken[name]
            raise NotReady(f"domain {name!r} is unavailable: its module (v{version}) failed "
                           f"to load ({problem}); other domains are served",
                           field=item.domain_field)


def check_mixtures(prepared: Sequence[Prepared]) -> None:
    for item in prepared:
        if item.mixture is None:
            decision = item.decision
            used = decision.domain if decision.mode != "ensemble" else "an ensemble"
            families = " or ".join(map(repr, mixture_families()))
            raise InvalidInput("return_proportions needs a word-level mixture (family "
                               f"{families}) to translate the text; it was routed to "
                               f"{used!r} (mode {decision.mode!r})", field="return_proportions")
