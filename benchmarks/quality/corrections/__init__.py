"""A module refreshed from translators' corrections while a live server answers (make bench-
corrections), and its report."""
