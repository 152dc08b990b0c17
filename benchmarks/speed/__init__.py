"""Speed benchmarks (issue #18 moves the others here)."""
