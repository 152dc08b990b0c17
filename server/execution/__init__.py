"""The process's execution layout: which thread runs what, on which CPUs, at which
priority, and the allocator settings the engine decodes under."""
