"""Corrections: translators' post-edits of machine output, checked and stored so that the
training sidecar can refresh a domain's module from them (issue #49)."""
