"""What an operator sees of the running process: Prometheus metrics, liveness (the
watchdog), the SIGTERM drain (lifecycle) and the replica header."""
