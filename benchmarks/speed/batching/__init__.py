"""What the way batches are cut and mixed costs: `batch_lengths` (the scheduler's lookahead),
`mixed_domains` (adapters of several domains in one batch), `mixed_lengths` and
`live_engine` (continuous against static batching, served and at the engine)."""
