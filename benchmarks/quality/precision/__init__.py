"""BLEU of lower-precision weights against float32: `adapter_precision` (int8 and bfloat16
adapters), `compact_weights` (int8 built-in files), `cpu_bf16_quality` (the bfloat16 CPU
path)."""
