"""The training sidecar's process (`python -m trainer`, trainer/__main__.py): the worker
loop that claims jobs, runs them and records the outcome (worker), and its place below
the server on a shared host (priority)."""
