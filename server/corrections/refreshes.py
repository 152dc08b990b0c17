"""The last refresh of each domain from its corrections, for the admin summary and the
web page's Operate view (server/api/admin_views.py `last_refresh` gives its job, state
and the gate's scores: the served and the refreshed module on the dev set and on the
held-back corrections)."""

from __future__ import annotations

from model_store import Job, Store
from server.serving.refresh_jobs import is_refresh


def last_refresh_jobs(store: Store) -> dict[str, Job]:
    """Domain -> its newest refresh job (of any backbone)."""
    newest: dict[str, Job] = {}
    for job in store.registry.list_jobs():
        if is_refresh(job) and (job.domain not in newest
                                or job.created_at > newest[job.domain].created_at):
            newest[job.domain] = job
    return dict(sorted(newest.items()))
