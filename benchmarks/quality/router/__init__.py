"""The router on its own: `router` (make eval-router: accuracy per domain, routing policies
against the backbone), `router_extras` (extra training text per class), `router_new_domain`
(a domain added from data)."""
