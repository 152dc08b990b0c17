"""Async micro-batching: token budgets, max wait, bounded queue, deadlines, fairness."""

from server.scheduling.batching import Pending, job_cost
from server.scheduling.scheduler import BatchRunner, Scheduler

__all__ = ["BatchRunner", "Pending", "Scheduler", "job_cost"]
