"""Request and response bodies (pydantic v2) of the native API: the shared field types and
error body, and the translation endpoints' bodies (/translate, /translate/batch). Every
other subject has its own `schemas_<subject>.py` beside this one."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from server.api.schemas_memories import MemoryAnswer, MemoryOptions
from server.core.settings import MAX_BATCH_ITEMS, MAX_TEXT_CHARS
from server.routing.policy import RoutingMode

DOMAIN_DESCRIPTION = (
    'A served domain name; "generic" (plain backbone); absent, null or "auto" (routed '
    'automatically); or a mixture {"medical": 0.7, "law": 0.3} (an ensemble with these '
    'weights, "generic" allowed as a member).')
# Every string, integer and list is bounded here, so that the OpenAPI schema states what
# validation accepts; the configured limits (413, NMT_LIMITS__*) may be lower.
MAX_NAME_CHARS = 64  # domain names (model_store NAME_PATTERN: at most 63) and "generic"
MAX_ENSEMBLE_MEMBERS = 1024  # the engine's slots per bank are at most this
DomainName = Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)]
DomainField = (DomainName | Annotated[dict[DomainName, float],
                                      Field(max_length=MAX_ENSEMBLE_MEMBERS)] | None)
TextField = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]
FormatField = Literal["text", "html"]
FORMAT_DESCRIPTION = (
    '"text" (default): placeholders, URLs, e-mail addresses, entities and numbers come back '
    'verbatim; "html": an HTML document or fragment, tags/attributes/entities/comments kept, '
    'script/style/code/pre untranslated')
GLOSSARY_DESCRIPTION = (
    'terms to enforce, {"source term": "target term"}: matched ignoring case, longest first')
GLOSSARY_ID_DESCRIPTION = "a stored glossary (PUT /admin/glossaries/{name}) to enforce"


class Strict(BaseModel):
    # strict: a JSON true is not the integer 1 nor "1" an integer, as the schema says
    model_config = ConfigDict(extra="forbid", strict=True)


def valid_unicode(text: str | None) -> str | None:
    try:
        if text is not None:
            text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text is not valid Unicode (lone surrogate)") from None
    return text


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class DecodingOptions(Strict):
    beam_size: int | None = Field(
        None, ge=1, le=64, description="beam size (default: the server's; bounded by "
                                       "NMT_DECODING__MAX_BEAM_SIZE)")
    n_best: int = Field(1, ge=1, le=64, description="alternatives to return, with scores "
                                                    "(at most beam_size)")
    max_length: int | None = Field(None, ge=1, le=4096,
                                   description="most target tokens per sentence")


class TextOptions(Strict):
    """Format and glossary: shared by /translate, batch items and the batch itself."""

    format: FormatField = Field("text", description=FORMAT_DESCRIPTION)
    glossary: dict[str, str] | None = Field(None, description=GLOSSARY_DESCRIPTION)
    glossary_id: str | None = Field(None, description=GLOSSARY_ID_DESCRIPTION)
    split_sentences: Literal["on", "off", "nonewlines"] = Field(
        "on", description='plain text (as DeepL\'s option): "on" a sentence ends at its '
                          'punctuation or at a line break; "nonewlines" at its punctuation '
                          'only; "off" each paragraph (lines between empty lines) is one '
                          "sentence. Every mode returns as many lines as were sent")

    @model_validator(mode="after")
    def _one_glossary(self) -> TextOptions:
        if self.glossary is not None and self.glossary_id is not None:
            raise ValueError("give either glossary or glossary_id, not both")
        return self


# Directions (docs/DIRECTIONS.md): ISO 639-1 codes; "auto" detects the source language.
SourceField = Annotated[str | None, Field(
    pattern=r"^([a-z]{2}|auto)$",
    description='source language (ISO 639-1) or "auto" (detected); with target, picks the '
                "direction (backbone); absent with target absent: the server's default "
                "direction")]
TargetField = Annotated[str | None, Field(
    pattern=r"^[a-z]{2}$", description="target language (ISO 639-1); see source")]


class Detected(BaseModel):
    language: str = Field(description="the detected source language (ISO 639-1)")
    confidence: float = Field(description="the detector's probability of it, 0..1")


class QualityOptions(Strict):
    """What to do with sentences the estimator scores low (/translate and the batch)."""

    min_quality: float | None = Field(
        None, ge=0, le=1, description="a sentence whose `quality` is below this is low "
                                      "(default: NMT_QUALITY__MIN_QUALITY, else the "
                                      "estimator's fitted threshold)")
    on_low_quality: Literal["keep", "flag", "source", "omit"] = Field(
        "flag", description='a low sentence is returned as translated ("keep"), also marked '
                            '`flagged` ("flag"), replaced by its source ("source") or by '
                            'nothing ("omit"); line breaks around it are kept')


class TranslateRequest(TextOptions, QualityOptions, MemoryOptions):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"text": "The patient takes one tablet a day.", "domain": "medical"},
        {"text": "Member states shall comply.", "domain": {"law": 0.7, "generic": 0.3}},
        {"text": "Click the button.", "options": {"beam_size": 4, "n_best": 2}}]})

    text: TextField = Field(description="the text to translate (sentences and paragraphs "
                                        "kept; NMT_LIMITS__MAX_TEXT_CHARS)")
    domain: DomainField = Field(None, description=DOMAIN_DESCRIPTION)
    source: SourceField = None
    target: TargetField = None
    options: DecodingOptions = Field(default_factory=DecodingOptions)
    return_proportions: bool = Field(
        False, description="debug: also return the word-level domain proportions of every "
                           "source token (the text must be translated by a word-level "
                           "mixture, family mixing; 422 otherwise)")
    explain: bool = Field(
        False, description="also return `explanation` (the classifier's posterior of every "
                           "label, the routing threshold) and, when a word-level mixture "
                           "translated the text, its `proportions`; never refused")

    _check_text = field_validator("text")(valid_unicode)


class BatchItem(TextOptions, MemoryOptions):
    text: TextField = Field(description="the text to translate")
    domain: DomainField = Field(None, description=DOMAIN_DESCRIPTION + " Default: the "
                                                  "request's domain.")

    _check_text = field_validator("text")(valid_unicode)


class BatchRequest(TextOptions, QualityOptions, MemoryOptions):
    items: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH_ITEMS,
                                   description="texts, answered in this order "
                                               "(NMT_LIMITS__MAX_BATCH_ITEMS)")
    domain: DomainField = Field(None, description="default domain of items without one")
    source: SourceField = None
    target: TargetField = None
    options: DecodingOptions = Field(default_factory=DecodingOptions)
    run_async: bool = Field(
        False, alias="async",
        description="answer 202 with a job at once (follow Location, "
                    "GET /translate/batch/jobs/{id}); a batch of more than "
                    "NMT_SCHEDULER__BATCH_ASYNC_CHARS characters is a job anyway")
    stream: bool = Field(
        False, description="wait, but receive the results as NDJSON, one line per item "
                           "in order as each finishes (also: Accept: application/x-ndjson)")


class Routing(BaseModel):
    mode: RoutingMode
    domain: str | None = Field(description="the domain used (for mode mixture: the "
                                           "word-level mixture's); null for an ensemble")
    confidence: float | None = Field(description="the classifier's confidence, when asked")
    weights: dict[str, float] | None = Field(description="ensemble weights (sum to 1)")
    module_version: int | None = Field(description="version of the single module used")
    module_versions: dict[str, int] | None = Field(
        description="ensembles: the version of every module used")


class Alternative(BaseModel):
    translation: str
    score: float = Field(description="length-normalised log-probability (mean over sentences)")


class SentenceProportions(BaseModel):
    pieces: list[str] = Field(description="the sentence's source pieces (EOS included)")
    layers: list[list[list[float]]] = Field(
        description="per encoder layer, per piece: the proportion of each domain (in the "
                    "order of `domains`; the mean over the layer's mixed projections)")


class Proportions(BaseModel):
    domain: str = Field(description="the word-level mixture that translated the text")
    domains: list[str] = Field(description="the mixed domains, in proportion order")
    sentences: list[SentenceProportions] = Field(description="one per translated sentence")


class RouterInfo(BaseModel):
    backbone: str = Field(description="the backbone (direction) the router belongs to")
    name: str = Field(description="the classifier's name (NMT_ROUTING__CLASSIFIER, or a "
                                  "tenant's own router)")
    version: int
    shared: bool = Field(description="another direction's router: this one has none of its "
                                     "own and reads the same source language")


class Explanation(BaseModel):
    posteriors: dict[str, float] | None = Field(
        description="the classifier's calibrated posterior of every label (the top one "
                    "is routing.confidence), when automatic routing asked it; null otherwise")
    router: RouterInfo | None = Field(
        None, description="the router that gave the posteriors; null when none was asked")
    threshold: float = Field(description="confidence at or above which the classifier's "
                                         "domain is used alone (NMT_ROUTING__THRESHOLD)")


class GlossaryResult(BaseModel):
    applied: list[str] = Field(description="glossary source terms found in the text whose "
                                           "target is in the translation")
    missed: list[str] = Field(description="terms found in the text whose target is not")
    forbidden: list[str] = Field(
        default_factory=list, exclude_if=lambda value: not value,
        description="the glossary's forbidden target terms (TBX: deprecated, superseded, "
                    "forbidden) that the translation holds (absent when none)")


class Sentence(BaseModel):
    source: str = Field(description="the sentence as written in the request")
    translation: str = Field(description="its translation as the answer carries it")
    quality: float = Field(description="estimated quality in [0, 1]: the sentence's expected "
                                       "chrF / 100 (docs/API.md, Quality)")
    flagged: bool = Field(description="quality < min_quality (and on_low_quality is not keep)")
    issues: list[str] = Field(description='what the detectors found in the first output: '
                                          '"copy", "loop", "dropped", "invented"')
    recovered: str | None = Field(description="the issue a re-decode fixed (the output was "
                                              "replaced); null otherwise")


class TranslateResponse(MemoryAnswer):
    translation: str
    quality: float | None = Field(
        None, description="the lowest sentence quality of the text; null when no sentence "
                          "was translated or scoring is off")
    sentences: list[Sentence] | None = Field(
        None, description="every translated sentence with its quality, in text order")
    routing: Routing
    alternatives: list[Alternative] | None = Field(
        None, description="n-best alternatives, best first (only when n_best > 1)")
    proportions: Proportions | None = Field(
        None, description="word-level domain proportions (with return_proportions, or "
                          "explain when a word-level mixture translated the text)")
    glossary: GlossaryResult | None = Field(
        None, description="the glossary's terms in this text (only when a glossary applied)")
    explanation: Explanation | None = Field(
        None, exclude_if=lambda value: value is None,
        description="why the text was routed as it was (only with explain; absent otherwise)")


class BatchResponse(BaseModel):
    results: list[TranslateResponse]


# With source "auto" the answers also say what was detected (their own classes, so that
# every other answer keeps exactly its fields).
class DetectedTranslateResponse(TranslateResponse):
    detected: Detected = Field(description='the detected source language (source "auto")')


class DetectedBatchResponse(BatchResponse):
    detected: Detected = Field(description="the source language of all items together")
