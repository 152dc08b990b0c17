"""A polite client beside misbehaving ones: `adversarial` (make bench-adversarial), the
adversaries, and `adversarial_compare` (static and continuous batching side by side)."""
