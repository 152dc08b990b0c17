"""The Retry-After of a client refused for too many unfinished jobs (batch or document)."""

from __future__ import annotations

from server.core.job_pace import UNPACED_RETRY_S, soonest_done_s


def test_the_soonest_job_at_its_own_pace_decides() -> None:
    # half done in 10 s: 10 s left; a quarter done in 10 s: 30 s left
    assert soonest_done_s([(10, 5, 990.0), (8, 2, 990.0)], now=1000.0) == 10
    assert soonest_done_s([(8, 2, 990.0)], now=1000.0) == 30


def test_a_job_without_progress_has_no_pace_and_a_wait_is_never_under_a_second() -> None:
    assert soonest_done_s([(10, 0, 990.0)], now=1000.0) == UNPACED_RETRY_S
    assert soonest_done_s([], now=1000.0) == UNPACED_RETRY_S
    assert soonest_done_s([(10, 0, 990.0), (4, 3, 999.9)], now=1000.0) == 1
    assert soonest_done_s([(4, 4, 990.0)], now=1000.0) == 1  # done, not yet marked
