"""Registry schema revisions, oldest first (`down_revision` links them)."""
