"""The server's one typed settings tree; the only place environment variables are read.

Every field is an environment variable with the prefix `NMT_`; nested groups use `__`
(`NMT_ENGINE__DEVICE=cuda`, `NMT_SCHEDULER__MAX_WAIT_MS=10`). The store and logging
fields come from the base shared with the training sidecar (launch/settings.py).
`nmt-server` / `python -m server` flags override the environment. The admin token is read
from the environment only.
docs/API.md lists every setting.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from launch.settings import ProcessSettings
from server.core.memory_settings import MemorySettings
from server.core.settings import (
    AccessSettings,
    CorrectionSettings,
    DecodingSettings,
    DirectionSettings,
    DocumentSettings,
    EngineSettings,
    LimitSettings,
    QualitySettings,
    RoutingSettings,
    SchedulerSettings,
)
from server.execution.settings import ExecutionSettings, moved_into_execution


class Settings(ProcessSettings):
    """Everything the server reads at start-up (env prefix NMT_, nested delimiter __)."""

    model_config = SettingsConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8000, ge=0, le=65535, description="port to listen on")
    backbone: str | None = Field(
        None, description="backbone name to serve (default: the store's only/active one); "
                          "with several: the default direction (docs/DIRECTIONS.md)")
    all_backbones: bool = Field(
        True, description="also serve every other active backbone as a direction of its "
                          "own (requests pick it with source/target); false: only `backbone`")
    admin_token: SecretStr | None = Field(
        None, description="bearer token of /admin (environment only; unset = admin disabled)")
    poll_interval_s: float = Field(
        1.0, gt=0, description="how often the registry is polled for activations "
        "(PostgreSQL also announces them: replicas reload at once)")
    drain_timeout_s: float = Field(
        60.0, gt=0, description="DELETE /admin/domains waits this long for in-flight work")
    shutdown_drain_s: float = Field(
        40.0, gt=0, le=3600,
        description="on SIGTERM: how long in-flight requests may run before the process "
                    "exits (readiness is 503 and new requests are refused at once); past "
                    "it, the work still waiting is answered 503 with Retry-After")
    liveness_stall_s: float = Field(
        120.0, gt=0, le=86400,
        description="liveness fails when one engine call, or the scheduler's batching "
                    "loop, has made no progress for this long")
    admin_port: int | None = Field(
        None, ge=1, le=65535,
        description="serve /admin on this port only (a separate listener, like "
                    "TorchServe's management API); unset: /admin is on the main port")
    admin_host: str = Field("127.0.0.1", description="address of the admin listener")
    engine: EngineSettings = Field(default_factory=EngineSettings)
    execution: ExecutionSettings = Field(
        default_factory=ExecutionSettings,
        description="which thread runs what, on which CPUs, at which priority "
                    "(server/execution/)")
    limits: LimitSettings = Field(default_factory=LimitSettings)
    decoding: DecodingSettings = Field(default_factory=DecodingSettings)
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    routing: RoutingSettings = Field(default_factory=RoutingSettings)
    documents: DocumentSettings = Field(
        default_factory=DocumentSettings,
        description="whole files: POST /translate/file (sizes, batches, jobs)")
    quality: QualitySettings = Field(
        default_factory=QualitySettings,
        description="per-sentence quality: scoring, detectors, recovery, the default floor")
    access: AccessSettings = Field(
        default_factory=AccessSettings,
        description="API keys and per-key rate limits of the public endpoints (off by default)")
    corrections: CorrectionSettings = Field(
        default_factory=CorrectionSettings,
        description="post-edits (POST /corrections, /libretranslate/suggest)")
    directions: DirectionSettings = Field(
        default_factory=DirectionSettings,
        description="how many backbones stay loaded (docs/DIRECTIONS.md)")
    memories: MemorySettings = Field(
        default_factory=MemorySettings,
        description="translation memories: matches, imports (docs/API.md, Translation "
                    "memories)")

    @model_validator(mode="before")
    @classmethod
    def _execution_had_other_names(cls, values: Any) -> Any:
        return moved_into_execution(values)  # NMT_ENGINE__FRONT_CPUS & co. still count

    @model_validator(mode="after")
    def _ensemble_fits_slots(self) -> Settings:
        if self.routing.top_k > self.engine.slots_per_bank:
            raise ValueError(f"routing.top_k ({self.routing.top_k}) exceeds "
                             f"engine.slots_per_bank ({self.engine.slots_per_bank})")
        if self.admin_port is not None and self.admin_port == self.port:
            raise ValueError(f"admin_port ({self.admin_port}) must differ from port")
        return self

    def admin_secret(self) -> str | None:
        """The admin token, or None when unset or empty (admin disabled)."""
        if self.admin_token is None:
            return None
        return self.admin_token.get_secret_value() or None
