"""Async micro-batching: token budgets, max wait, bounded queue, deadlines, fairness."""

from server.scheduling.batching import Pending, job_cost
from server.scheduling.scheduler import BatchRunner, EngineThread, Scheduler

__all__ = ["BatchRunner", "EngineThread", "Pending", "Scheduler", "job_cost"]
