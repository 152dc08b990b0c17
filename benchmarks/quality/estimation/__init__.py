"""Quality estimation (make bench-quality): the estimator fitted on dev sets and measured on
test sets, over decoding runs that keep every sentence's review."""
