"""Quality benchmarks of what happens around the engine (markup, placeholders, glossaries)."""
