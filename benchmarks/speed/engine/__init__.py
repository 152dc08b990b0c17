"""The engine against its peers on one machine: `engine_speed` (make bench-engine;
CTranslate2, Hugging Face `generate`), the systems it times, the interleaved measurement,
its report (one run per host kind) and profile, and `backbone_shapes_speed` (candidate
backbone shapes side by side)."""
