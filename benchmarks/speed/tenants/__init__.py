"""Many tenants' modules on one backbone: residency, traffic spread, the registry at scale."""
