"""Pack the default recipe's training data for a GPU run (issue #47): token ids of every
corpus (7 domains + extra genres) through the recipe's joint sentencepiece, with the
recipe's maximum length and corpus temperature, plus the 7 domains' dev splits.

    python -m trainer.gpu.pack --data ../shared/data --direction en-fr --out .gpu

`--out` (default `.gpu`, ignored by git) is what the device call carries: it must lie in
the checkout the session was started in (the device tool sends that one, also for a
helper's call; docs/GPU.md). The command prints its size beside that checkout's working
tree against the 64 MiB a call may take, and fails when they do not fit. The
domains' train splits are the pack's first corpora: the GPU run trains each adapter on its
domain's slice. Format: trainer/gpu/packed.py.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import sentencepiece as spm

from trainer.gpu.packed import (
    DEV_FILE,
    DIRECTIONS,
    PACK_FILE,
    SPM_FILE,
    TRAIN_FILE,
    PackInfo,
    TokenPairs,
    sha256_file,
    write_pairs,
)
from trainer.recipes import default_en_fr as recipe
from trainer.recipes.directions import DIRECTIONS as RECIPE_DIRECTIONS
from trainer.training.data import EncodedPairs, encode_pairs

log = logging.getLogger("trainer.gpu.pack")
CARRY_LIMIT = 64 * 2**20  # what one device call may carry: working tree + carried paths
BUILTIN_SPM = recipe.BUILTIN_DIR / "backbones" / "default-en-fr"




def token_pairs(encoded: EncodedPairs, corpus: np.ndarray | None = None) -> TokenPairs:
    """The pack's layout: sources without the EOS `encode_pairs` appends."""
    src = [s[:-1] for s in encoded.source]
    return TokenPairs(
        np.concatenate(src).astype(np.uint16) if src else np.zeros(0, np.uint16),
        np.concatenate(encoded.target).astype(np.uint16) if src else np.zeros(0, np.uint16),
        np.array([len(s) for s in src], dtype=np.uint8),
        np.array([len(t) for t in encoded.target], dtype=np.uint8), corpus)


def default_spm(run_dir: Path) -> Path:
    """The recipe's run dir vocabulary, else the published en-fr backbone's (the recipe's
    joint vocabulary: it encodes either direction)."""
    if (run_dir / "spm.model").exists():
        return run_dir / "spm.model"
    found = sorted(BUILTIN_SPM.glob("v*/source.spm"), key=lambda p: int(p.parent.name[1:]))
    if not found:
        raise FileNotFoundError(f"no spm.model in {run_dir} and no built-in backbone under "
                                f"{BUILTIN_SPM}: give --spm")
    return found[-1]


def pack(data_dir: Path, out: Path, *, direction: str, spm_path: Path,
         temperature: float, preset: int = 9) -> PackInfo:
    """Write the pack to `out` (replaced whole, through a staging folder)."""
    if recipe.MAX_LEN > 255:
        raise ValueError("the pack stores lengths as uint8")
    processor = spm.SentencePieceProcessor(model_file=str(spm_path))
    if processor.get_piece_size() > 2**16:
        raise ValueError("the pack stores ids as uint16")
    # the recipe's corpora, source side first in `direction` (fr-en: the en-fr pairs reversed)
    train_corpora = recipe.corpora(data_dir, "train", RECIPE_DIRECTIONS[direction])
    names = tuple(c.name for c in train_corpora)
    sizes: list[int] = []
    parts: list[EncodedPairs] = []
    for corpus in train_corpora:
        pairs = corpus.read()
        encoded = encode_pairs(pairs, processor, max_len=recipe.MAX_LEN)
        if len(encoded) == 0:
            raise ValueError(f"corpus {corpus.name}: no pair under {recipe.MAX_LEN} tokens")
        log.info("%s: %d pairs, %d kept", corpus.name, len(pairs), len(encoded))
        sizes.append(len(encoded))
        parts.append(encoded)
    train = EncodedPairs([s for p in parts for s in p.source],
                         [t for p in parts for t in p.target])
    dev_corpora = recipe.corpora(data_dir, "dev", RECIPE_DIRECTIONS[direction])
    dev_parts = [encode_pairs(c.read(), processor, max_len=recipe.MAX_LEN) for c in dev_corpora]
    dev = EncodedPairs([s for p in dev_parts for s in p.source],
                       [t for p in dev_parts for t in p.target])
    labels = np.concatenate([np.full(len(p), i, np.uint8) for i, p in enumerate(dev_parts)])
    info = PackInfo(direction=direction, max_len=recipe.MAX_LEN, temperature=temperature,
                    names=names, pairs=tuple(sizes),
                    domains=tuple(c.name for c in dev_corpora),
                    dev_pairs=tuple(len(p) for p in dev_parts),
                    spm_sha256=sha256_file(spm_path), vocab_size=processor.get_piece_size())
    staging = out.with_name(out.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copyfile(spm_path, staging / SPM_FILE)
    write_pairs(token_pairs(train), staging / TRAIN_FILE, preset=preset)
    write_pairs(token_pairs(dev, labels), staging / DEV_FILE, preset=preset)
    (staging / PACK_FILE).write_text(info.to_json())
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return info


def tree_bytes(repo: Path) -> int:
    """Bytes of the files a device call sends besides its carry: tracked files and untracked
    ones git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=repo, capture_output=True,
                            check=True).stdout.decode().split("\0")
    return sum((repo / name).stat().st_size for name in listed
               if name and (repo / name).is_file())


def carrying_checkout(out: Path) -> Path:
    """The git checkout the pack sits in: the device call sends that checkout's files with
    the pack (the one the session was started in, not a helper's worktree)."""
    folder = next(p for p in out.resolve().parents if p.is_dir())
    found = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=folder,
                           capture_output=True, text=True, check=False)
    if found.returncode != 0:
        raise ValueError(f"{out} is not inside a git checkout: a device call carries the "
                         "pack from the checkout the session was started in")
    return Path(found.stdout.strip())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.gpu.pack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--direction", choices=DIRECTIONS, default="en-fr")
    parser.add_argument("--out", type=Path, default=Path(".gpu"))
    parser.add_argument("--spm", type=Path, help="joint sentencepiece (default: the recipe "
                        "run dir's, else the published backbone's)")
    parser.add_argument("--run-dir", type=Path, help="the recipe's run dir, whose spm.model "
                        "is the default vocabulary (default: runs/default-<direction>)")
    parser.add_argument("--temperature", type=float, default=recipe.SETTINGS.temperature,
                        help="corpus sampling temperature (default: the recipe's)")
    parser.add_argument("--preset", type=int, default=9, choices=range(10),
                        help="xz preset (9: smallest; ~4 min on a loaded 2-core machine)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    started = time.monotonic()
    run_dir = args.run_dir or Path(f"runs/default-{args.direction}")
    info = pack(args.data, args.out, direction=args.direction,
                spm_path=args.spm or default_spm(run_dir), temperature=args.temperature,
                preset=args.preset)
    packed = folder_bytes(args.out)
    repo = carrying_checkout(args.out)
    tree = tree_bytes(repo)
    log.info("packed %s pairs of %d corpora (%s, T=%s) into %s: %.1f MiB in %.0f s",
             f"{sum(info.pairs):,}", len(info.names), info.direction, info.temperature,
             args.out, packed / 2**20, time.monotonic() - started)
    verdict = "fits" if tree + packed <= CARRY_LIMIT else "DOES NOT FIT"
    log.info("a device call from %s carries its working tree (%.1f MiB) + the pack: %.1f of "
             "%.0f MiB: %s", repo, tree / 2**20, (tree + packed) / 2**20, CARRY_LIMIT / 2**20,
             verdict)
    return 0 if tree + packed <= CARRY_LIMIT else 1


if __name__ == "__main__":
    raise SystemExit(main())
