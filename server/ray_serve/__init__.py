"""The server as a Ray Serve application: N replicas of the same FastAPI app behind Ray's
HTTP proxy (`deployment.py`), and `python -m server.ray_serve`, which starts (or joins) a
Ray cluster and runs it (`__main__.py`). Ray does the routing, health checks, restarts and
autoscaling; the app is the one `python -m server` serves under uvicorn."""
