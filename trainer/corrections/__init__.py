"""Refreshing a domain's module from the corrections translators sent for it: when one is
due (refresh_trigger), which corrections it trains on (correction_set), the job itself
(refresh_job), its gate against the served module (refresh_gate) and the router retrained
with the corrected sources (refresh_router)."""
