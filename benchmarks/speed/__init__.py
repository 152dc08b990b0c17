"""Speed benchmarks: `engine_speed` (the engine against CTranslate2 / Marian-style peers),
`serve_load` (the HTTP server under load), `hot_add` (a new domain, upload to served).
The other modules are their helpers."""
