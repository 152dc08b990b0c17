"""The Serve deployment: every replica builds the usual app (`create_app`) from its own
environment (`NMT_*`, carried by the Serve application's `runtime_env`), loads the backbone
once in the app's lifespan and follows the shared registry like any single server.

`build` is the Serve config's `import_path` target (deploy/ray/serve-config.yaml);
`application` is what `python -m server.ray_serve` runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from ray import serve
from ray.serve import Application

from server.app import create_app
from server.settings import Settings

DEPLOYMENT = "nmt"
# The scheduler batches concurrent sentences, so a replica must be offered many requests
# at once (Serve's default, 5, would starve its batches). Past this, the proxy queues.
MAX_ONGOING_REQUESTS = 64


@serve.deployment(name=DEPLOYMENT, max_ongoing_requests=MAX_ONGOING_REQUESTS,
                  ray_actor_options={"num_cpus": 1}, health_check_period_s=5,
                  graceful_shutdown_timeout_s=30)
@serve.ingress()
class TranslationReplica:
    """One replica: the FastAPI app of `server.app`, built in the replica's process."""

    def __init__(self) -> None:
        self.settings = Settings()  # the replica's NMT_* environment; see runtime_env
        self.served: FastAPI | None = None  # `app` is the Serve wrapper's own property

    def __serve_build_asgi_app__(self) -> FastAPI:
        self.served = create_app(self.settings)
        return self.served

    async def check_health(self) -> None:
        """Serve restarts a replica whose check raises: only one that can serve nothing
        (its batch loop died or is silent, or an engine call is stuck: the liveness
        watchdog, server/operations/watchdog.py). A missing module or backbone is a
        readiness problem that a restart does not fix: /health/ready reports it."""
        watchdog = getattr(self.served.state, "watchdog", None) if self.served else None
        problems = watchdog.problems() if watchdog is not None else []
        if problems:
            raise RuntimeError("the replica is not alive: " + "; ".join(problems))


def application(*, replicas: int, cpus_per_replica: float,
                env: Mapping[str, str]) -> Application:
    """A fixed number of replicas, each with `cpus_per_replica` CPUs and `env` (the NMT_*
    settings, PYTHONPATH, OMP_NUM_THREADS) as its process environment."""
    options: dict[str, Any] = {"num_cpus": cpus_per_replica,
                               "runtime_env": {"env_vars": dict(env)}}
    deployment = TranslationReplica.options(  # type: ignore[attr-defined]
        num_replicas=replicas, ray_actor_options=options)
    bound: Application = deployment.bind()
    return bound


def build(args: Mapping[str, Any]) -> Application:
    """Serve config builder (`import_path: server.ray_serve.deployment:build`): replicas,
    autoscaling, resources and environment come from the config file; no arguments."""
    if args:
        raise ValueError(f"the nmt application takes no args (got {sorted(args)}); "
                         "settings are NMT_* variables in runtime_env.env_vars")
    bound: Application = TranslationReplica.bind()  # type: ignore[attr-defined]
    return bound
