"""A live server under load: `serve_load` (make bench-serve: served against the same work
offline), `serve_directions` (two directions against one), `ray_replicas` (Ray Serve),
`hot_add` (a new domain, upload to served), and the load generator, statistics, stores and
offline engine they share."""
