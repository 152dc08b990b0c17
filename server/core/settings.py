"""The settings sections that several packages read (one model per concern).

They sit at the bottom of the server (server/core/) so that every layer may import the
section it needs; the whole tree, `server.settings.Settings`, composes them and is read
from the environment (prefix `NMT_`, nested delimiter `__`). docs/API.md lists every
setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Hard bounds of the request schemas (server/api/schemas.py): the limits below may be set
# lower, never higher, so the OpenAPI schema states exactly what validation accepts.
MAX_TEXT_CHARS = 1_000_000
MAX_BATCH_ITEMS = 1024
EnsembleWeights = Literal["soft", "uniform", "fixed"]


class EngineSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field("cpu", description="torch device of the engine: cpu, cuda, cuda:1")
    dtype: Literal["float32", "float16", "bfloat16"] = Field(
        "float32", description="compute dtype (float16 / bfloat16 on CUDA; bfloat16 on CPUs "
                               "with bfloat16 instructions, see cpu_path)")
    int8: bool = Field(False, description="dynamic int8 quantization of linear layers (CPU)")
    cpu_path: Literal["auto", "float32", "bfloat16", "int8"] = Field(
        "auto", description="CPU decoding path (server/engine/host_paths.py): auto keeps "
                            "int8/dtype as set, else bfloat16 on CPUs with AMX-BF16 and "
                            "float32 elsewhere; an explicit path this CPU cannot run, or "
                            "that contradicts int8/dtype, stops the start with the reason")
    quantized_engine: Literal["auto", "x86", "onednn", "fbgemm", "qnnpack"] = Field(
        "auto", description="torch's engine for int8 matmuls (int8, module_int8): auto = "
                            "onednn on CPUs with AMX-INT8, torch's default (x86) elsewhere")
    packed: bool = Field(True, description="CPU float32: prepack linear weights for oneDNN "
                                           "(2-3x faster matmuls on some CPUs)")
    module_int8: bool = Field(
        False, description="CPU: adapters' matrices run from int8 copies (a quarter of the "
                           "bytes per decoding step). Residual adapters with 64-column "
                           "blocks run grouped through a C kernel built at start (8 mixed "
                           "modules at ~1.0x one module), others one fbgemm matmul each "
                           "(benchmarks/results/adapter_precision.md, engine_speed.md)")
    module_bf16: bool = Field(
        False, description="CPU: a batch's residual adapters run together, one batched "
                           "matmul per matrix over bfloat16 copies (8 mixed modules at "
                           "0.98x one module at beam 4; needs a CPU with bfloat16 "
                           "instructions to be fast; benchmarks/results/engine_speed.md, "
                           "adapter_precision.md); takes precedence over module_int8")
    module_grouped: bool | None = Field(
        None, description="a batch's residual adapters run grouped in the engine's dtype, "
                          "one batched matmul per matrix and layer instead of one matmul "
                          "per module; default: on CUDA only (module_bf16 groups anyway)")
    fixed_steps: bool | None = Field(
        None, description="decoding steps over fixed-shape buffers, each step one CUDA "
                          "graph replay (about 3x faster decoding on an H200: "
                          "benchmarks/results/engine_speed_gpu.md); default: on CUDA only")
    slots_per_bank: int = Field(
        16, ge=1, le=1024,
        description="device slots per module bank; also the most distinct modules per batch")
    host_capacity: int = Field(
        64, ge=1, description="modules kept in host memory (LRU); evicted ones reload from "
                              "the store on demand")
    host_budget_bytes: int | None = Field(
        None, ge=1, description="bytes of module tensors kept in host memory (LRU, beside "
                                "host_capacity); a cold module is read back off the engine "
                                "thread while other sentences decode; default: no byte bound")


class LimitSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_body_bytes: int = Field(
        2 * 1024 * 1024, ge=1024, le=1 << 30,
        description="bytes of a request body, uploads aside (413 while it streams)")
    max_text_chars: int = Field(10_000, ge=1, le=MAX_TEXT_CHARS,
                                description="characters per text (413 above)")
    max_batch_items: int = Field(64, ge=1, le=MAX_BATCH_ITEMS,
                                 description="items per /translate/batch request")
    max_request_chars: int = Field(
        100_000, ge=1, description="characters of all texts of one request together")
    max_request_sentences: int = Field(
        1000, ge=1, description="sentences of one request after splitting (413 above)")
    max_request_tokens: int = Field(
        40_000, ge=1, description="source tokens of one request after tokenizing (413 above)")
    max_preparing_chars: int = Field(
        400_000, ge=1,
        description="characters being routed, split and tokenized at once, all requests "
                    "together; beyond it requests get 429")
    max_upload_bytes: int = Field(
        2 << 30, ge=1, description="size of an uploaded module artifact (tar.gz)")
    max_domain_upload_bytes: int = Field(
        50 * 1024 * 1024, ge=1,
        description="size of a POST /admin/domains upload (parallel text of a new domain)")
    min_domain_pairs: int = Field(
        20, ge=1, description="training pairs a new domain needs at least (after a dev set "
                              "is held out)")
    max_glossary_entries: int = Field(
        1000, ge=1, description="entries of one glossary (per request or stored; 422 above)")
    max_glossary_term_chars: int = Field(
        200, ge=1, description="characters of one glossary term (422 above)")


class DecodingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    beam_size: int = Field(4, ge=1, description="beam size when a request names none")
    max_beam_size: int = Field(8, ge=1, le=64, description="largest beam a request may ask for")
    max_length: int = Field(
        256, ge=1, description="most target tokens per sentence (a request may ask for fewer)")
    length_ratio: float = Field(
        1.5, gt=0, description="default target budget: ratio x source tokens + 10")

    @model_validator(mode="after")
    def _beam_within_limit(self) -> DecodingSettings:
        if self.beam_size > self.max_beam_size:
            raise ValueError(f"beam_size {self.beam_size} exceeds max_beam_size "
                             f"{self.max_beam_size}")
        return self


class QualitySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="score every sentence (docs/API.md, Quality); "
                                            "off: no `quality`, no detectors, no recovery")
    min_quality: float | None = Field(
        None, ge=0, le=1, description="default min_quality of a request (unset: the "
                                      "estimator's fitted threshold)")
    recover: bool = Field(True, description="re-decode sentences a detector flags (copy, "
                                            "loop, dropped, invented) and keep the best")
    recovery_beam: int = Field(8, ge=1, le=64, description="beam of the first re-decode")


class SchedulerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_batch_tokens: int = Field(
        4096, ge=1, description="token budget of one batch: source tokens x beam x members")
    max_request_batch_tokens: int = Field(
        1024, ge=1,
        description="while other clients wait, one client's share of a batch beyond its "
                    "first sentence: a large request runs as short batches interleaved "
                    "with the others' work (alone, it fills whole batches)")
    lookahead_batches: int = Field(
        2, ge=1, le=8,
        description="a batch is cut from the next this-many batches' worth of waiting "
                    "sentences: the one left out most often (the oldest among equals) and "
                    "those nearest to it in length (a batch decodes until its longest "
                    "sentence ends); 1: the next batch's worth as it comes")
    max_wait_ms: float = Field(
        5.0, ge=0, description="longest a batch that is not full waits for companions, "
                               "after its oldest sentence arrived and after the last "
                               "batch ended")
    max_queue: int = Field(
        1024, ge=1,
        description="sentences one client (its API key, else its address) may have waiting; "
                    "beyond it that client gets 429 with Retry-After from its own queued "
                    "work; a request that fits its client's empty queue is always taken")
    client_sentences_per_minute: int | None = Field(
        None, ge=1,
        description="rate limit per client, in sentences per minute (off: None); beyond it "
                    "429 rate_limited with Retry-After from its allowance and queued work")
    request_timeout_s: float = Field(
        30.0, gt=0, description="base deadline of one request, queueing included; it grows "
                                "with the request's characters (timeout_per_char_s) up to "
                                "max_timeout_s, and a client may ask for less (deadline_s); "
                                "504 after")
    timeout_per_char_s: float = Field(
        0.002, ge=0, description="seconds a request's deadline grows per character it "
                                 "sends: a large batch is queued behind its share, never "
                                 "refused for being large")
    max_timeout_s: float = Field(
        600.0, gt=0, description="the longest deadline a request's size can grow to")
    batch_async_chars: int = Field(
        60_000, ge=1, description="a /translate/batch request with more characters than "
                                  "this becomes a job (202) unless it asks to stream")
    batch_job_ttl_s: float = Field(
        3600.0, gt=0, description="a finished /translate/batch job (and its results) is "
                                  "kept this long")
    max_batch_jobs: int = Field(8, ge=1, description="unfinished /translate/batch jobs of "
                                                     "one client; beyond them 429")
    retry_after_s: int = Field(1, ge=0, description="Retry-After of a 429 answer, seconds")
    continuous: bool = Field(
        True, description="continuous batching: sentences join and leave the running batch "
                          "at every decoding step (server/scheduling/continuous.py); false: "
                          "static batches that run until their longest sentence ends")
    live_request_tokens: int = Field(
        512, ge=1,
        description="continuous batching, while clients contend: one client's live rows "
                    "cost at most this (or one sentence); on a CPU a step's time "
                    "grows with its rows, so this bounds how much a bulk request slows a "
                    "short one's every step")
    light_step_tokens: int = Field(
        384, ge=0,
        description="continuous batching: while a sentence of a light client (one whose "
                    "recent work in the server is under half the clients' mean) is "
                    "live, the live rows cost at most this: the other clients' sentences "
                    "beyond it are parked (kept, resumed where they left off) and do not "
                    "join; at least one of them always steps; 0: off")


class AccessSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    api_keys: bool = Field(
        False, description="require an API key (X-API-Key) on the public endpoints; keys "
                           "are managed under /admin/keys")
    requests_per_minute: int = Field(
        60, ge=1, le=1_000_000, description="a key's requests per minute, unless the key "
                                            "sets its own (429 beyond)")
    chars_per_minute: int = Field(
        100_000, ge=1, le=1_000_000_000,
        description="a key's characters per minute, unless the key sets its own (429)")
    cache_s: float = Field(
        5.0, ge=0, le=3600, description="how long a looked-up key is trusted; a revocation "
                                        "reaches other replicas within this time")


class RoutingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    classifier: str = Field("router", description="name of the classifier artifact")
    threshold: float = Field(
        0.5, ge=0.0, le=1.0,
        description="classifier confidence at or above which a text goes to the predicted "
                    "domain; below it the open-domain ensemble runs")
    fallback: Literal["generic", "ensemble"] = Field(
        "generic", description="below the threshold: the plain backbone (generic), or the "
                               "open-domain ensemble (benchmarks/results/router.md measures "
                               "both)")
    ensemble: EnsembleWeights = Field(
        "soft", description="ensemble weights below the threshold: soft (classifier "
                            "posteriors), uniform, or fixed (fixed_weights)")
    top_k: int = Field(3, ge=1, description="domains in an automatic ensemble (most probable)")
    backbone_floor: float = Field(
        0.1, ge=0.0, le=1.0,
        description="soft ensembles: the plain backbone's weight is 1 - sum(top-k "
                    "posteriors), at least this much")
    fixed_weights: dict[str, float] = Field(
        default_factory=dict,
        description='fixed ensembles: domain -> weight ("generic" = plain backbone)')
    mixture: str | None = Field(
        None, description="a served domain whose module is a word-level mixture (family "
                          "mixing): requests without a domain go through it instead of the "
                          "classifier (routing mode \"mixture\")")


class DocumentSettings(BaseModel):
    """Whole files (`POST /translate/file`, server/documents/)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_bytes: int = Field(20 * 1024 * 1024, ge=1024,
                           description="size of an uploaded document (413 while it streams)")
    max_chars: int = Field(2_000_000, ge=1,
                           description="characters to translate in one document (413 above)")
    sync_chars: int = Field(
        20_000, ge=0, description="documents with more characters to translate answer 202 "
                                  "with a job instead of the file")
    chunk_chars: int = Field(
        8_000, ge=100, description="characters per batch a document is sent as (each batch "
                                   "is admitted like a /translate/batch request)")
    parallel_chunks: int = Field(2, ge=1, le=16,
                                 description="batches of one document in flight at once")
    jobs_dir: str | None = Field(
        None, description="where document jobs keep their files (default: "
                          "<store_dir>/document-jobs)")
    job_ttl_s: float = Field(24 * 3600.0, gt=0,
                             description="finished jobs and their files are deleted after")
    running_jobs: int = Field(2, ge=1, le=64, description="document jobs translated at once")
    max_client_jobs: int = Field(
        8, ge=1, description="unfinished document jobs of one client (its API key, else its "
                             "address); one more is refused with 429 until one finishes")
    job_timeout_s: float = Field(
        3600.0, gt=0, description="a job still unfinished this long after it was submitted "
                                  "fails")


class CorrectionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="accept corrections (POST /corrections and "
                                            "LibreTranslate's /suggest; off: 403)")
    min_length_ratio: float = Field(
        0.4, gt=0, description="a correction shorter than this times its source (in "
                               "characters) is refused")
    max_length_ratio: float = Field(
        2.5, gt=0, description="... and one longer than this times its source")
    ratio_min_chars: int = Field(
        12, ge=0, description="the length ratio is checked only when the longer of the two "
                              "texts has at least this many characters (short strings vary "
                              "more: \"OK\" -> \"D'accord\")")
    language_min_chars: int = Field(
        20, ge=0, description="the corrected target's language is identified only from this "
                              "many characters on (shorter texts are identified unreliably)")

    @model_validator(mode="after")
    def _ratios(self) -> CorrectionSettings:
        if self.min_length_ratio >= self.max_length_ratio:
            raise ValueError(f"min_length_ratio {self.min_length_ratio} must be below "
                             f"max_length_ratio {self.max_length_ratio}")
        return self


class DirectionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resident: int = Field(
        0, ge=0, le=1024,
        description="at most this many backbones loaded at once (0: every served backbone "
                    "stays loaded); the least recently used idle one is unloaded when "
                    "another direction's request needs room, and loaded again from the "
                    "store on its next request (docs/DIRECTIONS.md)")
    wait_s: float = Field(
        30.0, gt=0, le=3600,
        description="how long a request waits for its backbone to be loaded (other "
                    "directions' requests finishing first) before it gets 503")
