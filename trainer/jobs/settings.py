"""The training sidecar's typed settings; the only place it reads environment variables.

Shared with the server (same base, launch/settings.py): `NMT_STORE_DIR`, `NMT_REGISTRY_URL`,
`NMT_BUILTIN_ARTIFACTS`, `NMT_LOG_LEVEL`. The sidecar's own settings are the nested group
`NMT_TRAINER__*` (`NMT_TRAINER__WORKER_NAME`, `NMT_TRAINER__ROUTER__BUCKET`), so that they
never collide with a server setting of the same name (the server's `NMT_POLL_INTERVAL_S`
is its hot-reload period). Of the server's settings it reads one, from the same
environment: `NMT_EXECUTION__TRAINING_CPUS`, the CPUs a server on the same host yields
while a job trains, which its torch threads follow unless `NMT_TRAINER__THREADS` is set.
Two nested groups have modules of their own: the router's
(`NMT_TRAINER__ROUTER__*`, trainer/routers/settings.py, beside the router update that
reads it) and the refresh's (`NMT_TRAINER__REFRESH__*`, refresh_settings.py).
docs/API.md lists them all.
"""

from __future__ import annotations

import os
import socket

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import SettingsConfigDict

from launch.settings import ProcessSettings
from trainer.jobs.refresh_settings import RefreshSettings
from trainer.routers.settings import RouterSettings


def default_worker_name() -> str:
    # The host name is stable across restarts of a container (a restarted sidecar takes
    # its own running job over at once); another host waits for the heartbeat timeout.
    return socket.gethostname() or f"worker-{os.getpid()}"


class WorkerSettings(BaseModel):
    """`NMT_TRAINER__*`: the worker loop, crash recovery and training mechanics."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    worker_name: str = Field(default_factory=default_worker_name, min_length=1,
                             max_length=128, description="this worker's name in job rows")
    poll_interval_s: float = Field(2.0, gt=0, description="how often queued jobs are looked for")
    heartbeat_interval_s: float = Field(5.0, gt=0, description="job heartbeat period")
    heartbeat_timeout_s: float = Field(
        120.0, gt=0, description="a running job whose heartbeat is older belongs to a dead "
                                 "worker and is taken over (and resumed)")
    max_attempts: int = Field(3, ge=1, description="claims of a job before it is failed")
    threads: int | None = Field(
        None, ge=0,
        description="torch CPU threads; unset: as many as the CPUs a server on the same "
                    "host yields while a job trains (NMT_EXECUTION__TRAINING_CPUS, read "
                    "from the same environment, 1 by default; its 0, a server that never "
                    "yields, means torch's default), so that no training thread competes "
                    "with the engine; 0: torch's default (every core: a host of its own)")
    niceness: int = Field(10, ge=0, le=19,
                          description="the sidecar runs this many nice levels below the "
                                      "priority it was started with, so that a server on "
                                      "the same host keeps the CPU it needs while a module "
                                      "trains (trainer/sidecar/priority.py); 0: the same priority")
    checkpoint_every_s: float = Field(60.0, ge=0, description="training checkpoint period")
    progress_every_steps: int = Field(10, ge=1, description="steps between progress reports")
    bf16: bool = Field(True, description="CPU bf16 autocast while training, where the "
                                         "CPU has native bf16 (AVX512-BF16, AMX)")
    half: bool = Field(True, description="store modules as float16 (the gate scores what "
                                         "is stored)")
    router: RouterSettings = Field(default_factory=RouterSettings)
    refresh: RefreshSettings = Field(default_factory=RefreshSettings)


class ServerShare(BaseModel):
    """The one server setting the sidecar reads (`NMT_EXECUTION__*`; the server's others
    are ignored): how many CPUs a server on the same host yields while a job trains
    (server/execution/settings.py, whose default this repeats)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    training_cpus: int = Field(1, ge=0, description="the server's NMT_EXECUTION__TRAINING_CPUS")


class SidecarSettings(ProcessSettings):
    """Everything `nmt-trainer` reads at start-up (env prefix NMT_, nested __); the
    server's own variables in a shared environment are ignored, but for the CPUs it yields
    to training (`execution`)."""

    model_config = SettingsConfigDict(extra="ignore")

    trainer: WorkerSettings = Field(default_factory=WorkerSettings)
    execution: ServerShare = Field(default_factory=ServerShare)

    def torch_threads(self) -> int:
        """The sidecar's torch threads (0: torch's default): `NMT_TRAINER__THREADS` when
        set, else the CPUs the server yields, at most the CPUs this process may use."""
        if self.trainer.threads is not None:
            return self.trainer.threads
        return min(self.execution.training_cpus, usable_cpus())


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
