"""A CTranslate2 translator in a process of its own, driven over stdin/stdout (JSON lines).

    python -m benchmarks.speed.engine.ct2_worker MODEL_DIR COMPUTE_TYPE THREADS [DEVICE]

Why a process: CTranslate2 ships its own OpenMP runtime and math libraries; loaded into
the benchmark's process, it slowed this engine's torch decoding by ~40% (measured: greedy
0.36 s alone, 0.51 s once a Translator had run in the same process), and production never
co-locates them. This module imports nothing but CTranslate2 and the standard library.

Protocol: the first line is `{"pieces": [[...], ...], "target_length": N}`; then each
line `{"beam_size": B}` is answered with `{"lengths": [...]}` (tokens per sentence), and
end of input stops the worker.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    import ctranslate2

    model_dir, compute_type, threads = argv[0], argv[1], int(argv[2])
    device = argv[3] if len(argv) > 3 else "cpu"
    translator = ctranslate2.Translator(model_dir, device=device, compute_type=compute_type,
                                        intra_threads=threads, inter_threads=1)
    setup = json.loads(sys.stdin.readline())
    pieces: list[list[str]] = setup["pieces"]
    length = int(setup["target_length"])
    for line in sys.stdin:
        beam_size = int(json.loads(line)["beam_size"])
        results = translator.translate_batch(
            pieces, beam_size=beam_size, max_batch_size=len(pieces),
            min_decoding_length=length, max_decoding_length=length, return_scores=False)
        lengths = [len(result.hypotheses[0]) for result in results]
        sys.stdout.write(json.dumps({"lengths": lengths}) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
