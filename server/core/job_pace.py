"""When a client refused for too many unfinished jobs should try again (429 Retry-After).

Batch jobs (server/serving/batch_jobs.py) and document jobs (server/documents/jobs.py)
bound how many unfinished jobs one client may have; the refusal says when the soonest of
its jobs is likely done, at the pace each has kept so far.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

UNPACED_RETRY_S = 10  # Retry-After when none of the client's jobs has finished a part yet


def soonest_done_s(jobs: Iterable[tuple[int, int, float]], now: float) -> int:
    """Seconds (at least 1) until the soonest of `jobs` is likely done. Each job is
    (parts in all, parts done, epoch seconds it was submitted): its parts left at its
    pace so far; a job with nothing done yet has no pace and is left out."""
    waits = [(total - done) * (now - started) / done
             for total, done, started in jobs if done > 0]
    return max(1, math.ceil(min(waits))) if waits else UNPACED_RETRY_S
