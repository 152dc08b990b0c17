"""A live server under load: `serve_load` (make bench-serve: served against the same work
offline), `serve_directions` (one, two and three directions at the same load, over the
copies `direction_copies` publishes), `ray_replicas` (Ray Serve), `hot_add` (a new domain,
upload to served), and the load generator, statistics, stores and offline engine they
share."""
