"""Every Prometheus collector of the server, defined once, in a per-app registry.

Names follow `nmt_<subsystem>_<quantity>_<unit>`. Labels stay bounded: route templates,
status codes, error codes, routing modes, domains, families, tiers; never request ids,
texts or keys.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SENTENCE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
TOKEN_BUCKETS = (16, 64, 256, 1024, 2048, 4096, 8192, 16384, 65536)
SPREAD_BUCKETS = (1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)
CONFIDENCE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)
LOAD_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0)
TIERS = ("host", "device")


class Metrics:
    """The collectors of one app (tests build many apps, so no global registry)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("nmt_api_requests_total", "HTTP requests by route and status",
                                ["route", "status"], registry=r)
        self.latency = Histogram("nmt_api_request_latency_seconds", "HTTP request latency",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.errors = Counter("nmt_api_errors_total", "error answers by error code", ["code"],
                              registry=r)
        self.queue_depth = Gauge("nmt_scheduler_queue_depth", "sentences waiting for a batch",
                                 registry=r)
        self.batch_sentences = Histogram("nmt_scheduler_batch_sentences",
                                         "sentences per engine batch",
                                         buckets=SENTENCE_BUCKETS, registry=r)
        self.batch_tokens = Histogram("nmt_scheduler_batch_tokens",
                                      "budget tokens per engine batch (source x beam x members)",
                                      buckets=TOKEN_BUCKETS, registry=r)
        # batching.length_spread; NMT_SCHEDULER__LOOKAHEAD_BATCHES lowers it.
        self.batch_length_spread = Histogram(
            "nmt_scheduler_batch_length_spread",
            "longest over mean source length of an engine batch (1: all equal)",
            buckets=SPREAD_BUCKETS, registry=r)
        # with the wall clock, how busy the engine is (utilisation = rate of this counter)
        self.engine_busy = Counter("nmt_engine_busy_seconds",
                                   "seconds the engine thread spent decoding batches",
                                   registry=r)
        # continuous batching (server/scheduling/continuous.py)
        self.live_rows = Histogram("nmt_engine_live_rows", "rows per live decoding step",
                                   buckets=SENTENCE_BUCKETS, registry=r)
        self.live_step_seconds = Histogram("nmt_engine_live_step_seconds",
                                           "time of one live decoding step (joins included)",
                                           registry=r)
        self.live_joins = Counter("nmt_engine_live_joins_total",
                                  "sentences that joined a live batch", registry=r)
        self.live_leaves = Counter("nmt_engine_live_leaves_total",
                                   "sentences that finished in a live batch", registry=r)
        self.live_parks = Counter("nmt_engine_live_parks_total",
                                  "live sentences parked while a light client's sentence "
                                  "stepped (server/scheduling/light_clients.py)", registry=r)
        self.live_first_step_seconds = Histogram(
            "nmt_engine_live_first_step_seconds",
            "a sentence's wait from its queueing to the end of its first decoding step",
            registry=r)
        self.target_tokens = Counter("nmt_engine_target_tokens_total",
                                     "target tokens produced (best hypotheses)", registry=r)
        self.routing_decisions = Counter("nmt_routing_decisions_total",
                                         "routing decisions by mode", ["mode"], registry=r)
        self.predicted_domains = Counter("nmt_routing_predicted_domain_total",
                                         "classifier predictions by top domain", ["domain"],
                                         registry=r)
        self.confidence = Histogram("nmt_routing_confidence", "classifier confidence (top)",
                                    buckets=CONFIDENCE_BUCKETS, registry=r)
        self.module_loads = Counter("nmt_engine_module_loads_total",
                                    "modules copied into a device slot", ["family"], registry=r)
        self.module_evictions = Counter("nmt_engine_module_evictions_total",
                                        "modules evicted, by tier", ["tier"], registry=r)
        self.module_load_seconds = Histogram("nmt_engine_module_load_seconds",
                                             "time to make a module resident",
                                             buckets=LOAD_BUCKETS, registry=r)
        self.module_hits = Counter("nmt_engine_module_hits_total",
                                   "module uses that found it in a device slot already",
                                   ["family"], registry=r)
        self.module_read_seconds = Histogram(
            "nmt_engine_module_read_seconds", "time to read an evicted module back from the "
            "store (off the engine thread)", buckets=LOAD_BUCKETS, registry=r)
        self.module_host_bytes = Gauge("nmt_engine_module_host_bytes",
                                       "bytes of module tensors in the host tier", registry=r)
        self.access = Counter("nmt_access_requests_total",
                              "public requests by API key check outcome (accepted, missing, "
                              "refused, rate_limited); never the key", ["outcome"], registry=r)
        # tenants hashed into 16 buckets ("shared": keys of no tenant), never a name
        self.tenant_requests = Counter("nmt_tenant_requests_total",
                                       "admitted public requests by tenant bucket "
                                       "(server/core/tenancy.py)", ["tenant"], registry=r)
        self.rate_limited = Counter("nmt_access_rate_limited_total",
                                    "requests refused by a per-key limit, by limit (requests, "
                                    "characters)", ["limit"], registry=r)
        # server/engine/host_paths.py: 1 for the path chosen at start-up (CPU engines)
        self.cpu_path = Gauge("nmt_engine_cpu_path", "the engine's CPU decoding path and "
                              "quantized engine (1: chosen)", ["path", "quantized_engine"],
                              registry=r)
        self.resident_modules = Gauge("nmt_engine_resident_modules", "modules resident, by tier",
                                      ["tier"], registry=r)
        self.load_failures = Counter("nmt_engine_load_failures_total",
                                     "failed attempts to load an artifact, by kind (module, "
                                     "classifier); retried with backoff", ["kind"], registry=r)
        self.poll_errors = Counter("nmt_registry_poll_errors_total",
                                   "registry polls that failed (retried next tick)", registry=r)
        self.module_reloads = Counter("nmt_engine_module_reloads_total",
                                      "evicted modules read back from the store, by thread "
                                      "(worker: ahead of the batch; engine: inside a batch)",
                                      ["thread"], registry=r)
        # NMT_DIRECTIONS__RESIDENT: backbones unloaded, loaded again (serving/residency.py)
        self.backbone_loads = Counter("nmt_backbone_loads_total",
                                      "backbones loaded by the residency limit, by backbone",
                                      ["backbone"], registry=r)
        self.backbone_unloads = Counter("nmt_backbone_unloads_total",
                                        "backbones unloaded by the residency limit (least "
                                        "recently used), by backbone", ["backbone"], registry=r)
        self.backbones_resident = Gauge("nmt_backbones_resident", "backbones loaded now",
                                        registry=r)

        self.quality = Histogram("nmt_quality_score", "estimated quality of each sentence",
                                 buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
                                 registry=self.registry)
        self.quality_issues = Counter("nmt_quality_issues_total",
                                      "sentences a detector flagged, by issue", ["issue"],
                                      registry=self.registry)
        self.quality_recoveries = Counter(
            "nmt_quality_recoveries_total", "flagged sentences whose re-decode replaced the "
            "output, by issue", ["issue"], registry=self.registry)
        self.quality_low = Counter("nmt_quality_low_total", "sentences below min_quality, by "
                                   "what was done (on_low_quality)", ["action"],
                                   registry=self.registry)

    def on_engine_event(self, event: str, family: str, seconds: float) -> None:
        """The engine's residency observer: (event, family, seconds); events: "hit",
        "load", "eviction", "host_eviction" (server/engine/residency.py)."""
        if event == "load":
            self.module_loads.labels(family=family or "unknown").inc()
            self.module_load_seconds.observe(seconds)
        elif event == "hit":
            self.module_hits.labels(family=family or "unknown").inc()
        elif event == "eviction":
            self.module_evictions.labels(tier="device").inc()
        elif event == "host_eviction":
            self.module_evictions.labels(tier="host").inc()

    def set_resident(self, counts: Mapping[str, int]) -> None:
        for tier in TIERS:
            self.resident_modules.labels(tier=tier).set(counts.get(tier, 0))
        self.module_host_bytes.set(counts.get("host_bytes", 0))

    def render(self) -> bytes:
        return generate_latest(self.registry)
