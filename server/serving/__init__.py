"""The layer between the HTTP API and the engine, split by job:

- `state`: what is served (domain -> module version, the classifier), as immutable values;
- `runtime`: loading artifacts into the engine and keeping the served state in step with
  the registry; `holds`: which module versions in-flight requests use, and retirement;
  `watch`: the registry poller; `readiness`: the /health/ready checks;
- `translation`: one request's pipeline (limits, routing, splitting, scheduling, rejoining);
- `admin`, `admin_jobs`: domain administration and training-job submission.
"""
