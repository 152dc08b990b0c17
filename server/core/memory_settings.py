"""The memories' settings (NMT_MEMORIES__*): matches, imports, the change feed, and
retrieval during decoding (NMT_MEMORIES__RETRIEVAL__*). docs/API.md lists every setting."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat


class RetrievalSettings(BaseModel):
    """Retrieval during decoding (server/decoding/knn.py): the memory pairs most like each
    sentence are forced through the model into a per-request datastore that each decoding
    step consults, with a weight its distances decide (0 beyond `gate`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="memories in play also guide decoding (off: "
                                            "matches only)")
    max_pairs: int = Field(4, ge=1, le=32, description="memory pairs retrieved per sentence")
    min_score: float = Field(
        50.0, ge=1, le=100, description="a pair is retrieved when its source is at least this "
                                        "similar to the sentence (0-100)")
    k: int = Field(8, ge=1, le=64, description="nearest datastore entries per step")
    temperature: float = Field(0.1, gt=0, description="of the neighbours' softmax over "
                                                      "-distance")
    # gate: chosen on the dev sets at beam 4 for adapter + memory, the best mean with no
    # domain more than 0.3 BLEU below the adapter alone (2.0 cost subtitles 1.3);
    # benchmarks/results/memory_retrieval*.md
    gate: float = Field(
        1.0, gt=0, description="a step whose nearest entry is this far (mean squared "
                                "difference per dimension) or farther ignores the memory")
    max_weight: float = Field(0.5, ge=0, le=1, description="the memory's weight at "
                                                           "distance 0")
    # calibrate: on the dev sets (7 domains, 60 sentences each, adapter + memory) 27.88
    # BLEU on average against 26.65 with the fixed gate (religion +8.3, subtitles +0.5,
    # edu -0.3); benchmarks/results/gate_calibration.md
    calibrate: bool = Field(
        True, description="each memory's gate is chosen from its own pairs for the module "
                          "it decodes with (server/serving/gate_calibration.py); off: "
                          "`gate` for every memory")
    # calibration_pairs: 48 chose noisily on the dev sets (it: 3.0, 1.2 BLEU below the
    # fixed gate); 96 chose 1.5 there (benchmarks/results/gate_calibration.md)
    calibration_pairs: int = Field(
        96, ge=4, le=1000, description="held-out pairs a memory's gate is calibrated on "
                                       "(memories under 20 pairs use `gate`)")
    calibration_gates: tuple[PositiveFloat, ...] = Field(
        (0.5, 1.0, 1.5, 2.0, 3.0), min_length=1, description="the gates calibration "
                                                            "chooses among")
    calibration_margin: float = Field(
        0.5, ge=0, description="BLEU a gate must gain over retrieval off on the held-out "
                               "pairs to be chosen (else the smallest gate)")
    calibration_growth: float = Field(
        0.1, gt=0, description="a memory whose pair count changed by more than this "
                               "share since its calibration is calibrated again")


class MemorySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    retrieval: RetrievalSettings = Field(
        default_factory=RetrievalSettings,
        description="retrieval during decoding: memory pairs like the text guide each step "
                    "(NMT_MEMORIES__RETRIEVAL__*)")

    enabled: bool = Field(True, description="translation memories: matches in answers, "
                                            "/admin/memories (off: neither)")
    fuzzy_threshold: float = Field(
        75.0, ge=1, le=100, description="a memory pair whose source is at least this "
                                        "similar to the text (0-100) is a fuzzy match")
    max_matches: int = Field(3, ge=0, le=50, description="fuzzy matches per text, best first")
    max_fuzzy_chars: int = Field(
        2000, ge=0, description="longer texts get exact matches only (fuzzy scoring's "
                                "cost grows with the text)")
    poll_interval_s: float = Field(
        0.5, gt=0, le=60, description="how often the memories' change feed is read "
                                      "(PostgreSQL also announces changes at once)")
    feed_keep: int = Field(
        100_000, ge=1, description="the memories' change feed keeps its last this many "
                                   "changes (pruned every 5 minutes); a replica further "
                                   "behind reloads its memories whole")
    max_import_bytes: int = Field(
        512 * 1024 * 1024, ge=1024, description="largest TMX, TSV or XLIFF upload (413)")
    sync_import_bytes: int = Field(
        256 * 1024, ge=0, description="uploads up to this size are imported before the "
                                      "answer; larger ones become an import job (202)")
    max_owner_imports: int = Field(
        4, ge=1, description="unfinished import jobs the shared memories, or one tenant's, "
                             "may have (each holds its upload on disk until its turn); one "
                             "more is 429 too_many_jobs")
    max_pairs: int = Field(2_000_000, ge=1, description="most pairs in one memory")
    max_segment_chars: int = Field(
        10_000, ge=1, description="a unit whose source or target is longer is skipped")
