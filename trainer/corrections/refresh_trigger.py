"""An idle sidecar queues the refreshes that corrections made due: a domain with
`NMT_TRAINER__REFRESH__MIN_NEW_CORRECTIONS` new usable corrections since its last refresh
job (server/serving/refresh_jobs.py `due_refreshes`), checked every `check_every_s`."""

from __future__ import annotations

import logging
import math
import time

from model_store import Manifest, Store, StoreError
from server.core.errors import ServingError
from server.serving.refresh_jobs import due_refreshes, submit_refresh
from trainer.jobs.refresh_settings import RefreshSettings

log = logging.getLogger(__name__)


class RefreshTrigger:
    def __init__(self, store: Store, settings: RefreshSettings) -> None:
        self.store = store
        self.settings = settings
        self._checked = -math.inf

    def queue_due(self) -> bool:
        """Queue every due refresh (at most once per `check_every_s`); True if one was."""
        if self.settings.min_new_corrections == 0:
            return False
        now = time.monotonic()
        if now - self._checked < self.settings.check_every_s:
            return False
        self._checked = now
        queued = False
        try:
            for name in sorted(self.store.registry.active_versions("backbone")):
                backbone = self.store.record("backbone", name).manifest
                for domain in due_refreshes(self.store, name,
                                            min_new=self.settings.min_new_corrections):
                    queued |= self._queue(domain, backbone.name, backbone)
        except StoreError:  # a busy database: the next check retries
            log.exception("could not count new corrections")
        return queued

    def _queue(self, domain: str, name: str, backbone: Manifest) -> bool:
        try:
            job = submit_refresh(self.store, domain, backbone=backbone, trigger="corrections")
        except ServingError as error:  # raced an admin's request, or no original data
            log.warning("no refresh of %s (%s): %s", domain, name, error)
            return False
        log.info("queued refresh job %s of %s: enough new corrections", job.id, domain)
        return True
