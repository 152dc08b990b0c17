"""A backbone snapshot carried to the next machine in the repository's history rather than
in its tree. A snapshot weighs ~10.9 MB (snapshot.py: int8 rows, no optimizer state, the
vocabulary), and the tree has no room for one: 277 kB are left under the 60 MB of
tests/test_repository_size.py once the GPU run's chosen shape is published
(tests/trainer/test_gpu_repository_budget.py), 2.8 MB with its fallback shape. So the
snapshot goes into a commit of its own, beside the branch, and the branch takes it in as a
merge whose tree is the branch's own plus a pointer file (`<snapshot folder>.commit`: the
commit and the step). Every clone with history holds the snapshot (the merge keeps it
reachable), no tree of the branch does, and the budget tests count the pointer only.

    python -m trainer.recipes.default_en_fr --direction en-de --stage snapshot --run-dir $R
    python -m trainer.recipes.snapshot_history carry --direction en-de   # then: git push
    # next machine: --stage restore fetches it back (or: snapshot_history fetch)

The snapshot folder itself stays out of the tree: .gitignore lists it.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from trainer.recipes.directions import DIRECTIONS, EN_FR
from trainer.recipes.snapshot import PROGRESS_FILE, snapshot_dir

log = logging.getLogger("trainer.recipes.default_en_fr")

REPO = Path(__file__).resolve().parents[2]


def pointer_path(snapshot: Path) -> Path:
    return snapshot.with_name(snapshot.name + ".commit")


def _git(repo: Path, *args: str, index: Path | None = None, data: bytes | None = None) -> bytes:
    env = {**os.environ, "GIT_INDEX_FILE": str(index)} if index is not None else None
    done = subprocess.run(["git", *args], cwd=repo, env=env, input=data, capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.decode().strip()}")
    return done.stdout


def _tree_with(repo: Path, paths: list[Path], index: Path) -> str:
    """The tree of HEAD with `paths` (files or folders of the work tree) added."""
    _git(repo, "read-tree", "HEAD", index=index)
    _git(repo, "add", "--force", "--", *(str(p.relative_to(repo)) for p in paths), index=index)
    return _git(repo, "write-tree", index=index).decode().strip()


def carry(snapshot: Path, *, repo: Path = REPO) -> str:
    """Commit the snapshot folder beside HEAD and move HEAD to a merge of it that adds only
    the pointer file (also staged in the real index, so the work tree stays clean).
    Returns the snapshot's commit."""
    snapshot, head = snapshot.resolve(), _git(repo, "rev-parse", "HEAD").decode().strip()
    step = int(json.loads((snapshot / PROGRESS_FILE).read_text())["step"])
    relative = snapshot.relative_to(repo).as_posix()
    message = f"{snapshot.name}: backbone snapshot at step {step} (carried in history)"
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        side_tree = _tree_with(repo, [snapshot], index)
        side = _git(repo, "commit-tree", side_tree, "-p", head, "-m", message).decode().strip()
        pointer = pointer_path(snapshot)
        pointer.write_text(json.dumps({"commit": side, "path": relative, "step": step},
                                      indent=1) + "\n")
        tree = _tree_with(repo, [pointer], index)
    merge = _git(repo, "commit-tree", tree, "-p", head, "-p", side, "-m",
                 f"{message}: {pointer.name} names it; the tree holds the pointer only")
    merge_sha = merge.decode().strip()
    _git(repo, "update-ref", "-m", "snapshot_history carry", "HEAD", merge_sha, head)
    _git(repo, "add", "--", pointer.relative_to(repo).as_posix())
    log.info("snapshot of step %d carried in commit %s (HEAD %s)", step, side[:12], merge_sha[:12])
    return side


def fetch(snapshot: Path, *, repo: Path = REPO) -> bool:
    """Write the snapshot folder back from the commit its pointer names (replacing any
    older one). False when there is no pointer, or the folder already holds that step."""
    pointer = pointer_path(snapshot)
    if not pointer.exists():
        return False
    record = json.loads(pointer.read_text())
    present = snapshot / PROGRESS_FILE
    if present.exists() and json.loads(present.read_text())["step"] == record["step"]:
        return False
    archive = _git(repo, "archive", "--format=tar", record["commit"], record["path"])
    staging = snapshot.with_name(snapshot.name + ".fetch")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    prefix = record["path"].rstrip("/") + "/"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            name = member.name[len(prefix):] if member.name.startswith(prefix) else ""
            extracted = tar.extractfile(member) if member.isfile() else None
            if extracted is not None and name and "/" not in name:
                (staging / name).write_bytes(extracted.read())
    shutil.rmtree(snapshot, ignore_errors=True)
    staging.rename(snapshot)
    log.info("snapshot of step %d fetched from commit %s into %s", record["step"],
             record["commit"][:12], snapshot)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("carry", "fetch"))
    parser.add_argument("--direction", choices=sorted(DIRECTIONS), default=EN_FR.name)
    parser.add_argument("--snapshot", type=Path, default=None,
                        help="default: the recipe's snapshot folder of the direction")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    snapshot = args.snapshot or snapshot_dir(DIRECTIONS[args.direction])
    if args.command == "carry":
        carry(snapshot)
    elif not fetch(snapshot):
        log.info("nothing fetched: no %s, or %s holds its step already",
                 pointer_path(snapshot), snapshot)


if __name__ == "__main__":
    main()
