"""Speed benchmarks: `engine_speed` (the engine against CTranslate2 / Marian-style peers),
`serve_load` (the HTTP server under load), `hot_add` (a new domain, upload to served),
`ray_replicas` (Ray Serve: 1 vs 2 replicas, Ray's proxy vs uvicorn direct), `adversarial`
(a polite client beside misbehaving ones). The other modules are their helpers."""
