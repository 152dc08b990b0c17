"""Async micro-batching: token budgets, max wait, bounded queue, deadlines."""

from server.scheduling.scheduler import BatchRunner, EngineThread, Pending, Scheduler, job_cost

__all__ = ["BatchRunner", "EngineThread", "Pending", "Scheduler", "job_cost"]
