"""What the built-in models weigh in the repository, before and after a change of how they
are stored, and that the change loses nothing: every shipped router's posteriors on the
7 domains' dev sentences, every quality estimator and every backbone's fingerprint and
vocabularies, read from both versions, compared. Then what publishing en->de would add
(its backbone, 7 adapters, quality estimator and card; no router: it routes with en->fr's,
server/routing/shared_router.py), against the 60 MB tests/test_repository_size.py allows.

    python -m benchmarks.builtin_size --before REV [--data ../shared/data] [--lines 150] \
        [--ende-run runs/default-en-de]

`--before` is a git revision whose `model_store/builtin/` is the old storage; the new one is
the working tree's. `--ende-run`: en->de's run dir, whose vocabulary is measured instead of
estimated, and whose router, when it trained one (`--stage classifier`), is compared on
en->de's dev sentences with en->fr's (both read English): the reason en->de ships none.
Writes benchmarks/results/builtin_size.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.locations import DEFAULT_DATA, REPO, RESULTS_DIR
from benchmarks.report_files import write_report
from contract.artifacts import (
    CLASSIFIER_MODEL_FILE,
    MANIFEST_FILE,
    SOURCE_SPM_FILE,
    target_vocabulary_files,
)
from contract.backbone import BackboneConfig
from server.quality.estimator import Estimator
from server.routing.classifier import load_classifier
from trainer.gpu import repository_budget as rb

BUILTIN = Path("model_store/builtin")
LIMIT = rb.LIMIT
# a router's test sentences: each domain's dev split, read on the router's source side
ROUTERS = {"en-fr": ("classifiers/router", "en-fr", "en"),
           "fr-en": ("directions/default-fr-en/classifiers/router", "en-fr", "fr")}
QUALITY = ("default-en-fr", "default-fr-en")
BACKBONES = QUALITY


def tracked(rev: str | None) -> dict[str, int]:
    """Path -> bytes of the files git tracks at `rev` (None: the working tree)."""
    if rev is None:
        return {str(p): n for p, n in rb.tracked_sizes(REPO).items()}
    listed = subprocess.run(["git", "ls-tree", "-r", "-l", rev], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout
    sizes = {}
    for line in listed.splitlines():
        meta, path = line.split("\t", 1)
        sizes[path] = int(meta.split()[3])
    return sizes


def read(rev: str | None, path: str) -> bytes:
    if rev is None:
        return (REPO / path).read_bytes()
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, check=True,
                          capture_output=True).stdout


def version_dir(sizes: dict[str, int], folder: str) -> str:
    """The one shipped version directory under `folder`."""
    found = sorted({p.rsplit("/", 1)[0] for p in sizes
                    if p.startswith(f"{BUILTIN}/{folder}/v") and p.endswith(MANIFEST_FILE)})
    assert len(found) == 1, f"one version of {folder} is shipped, found {found}"
    return found[0]


def router_files(rev: str | None, sizes: dict[str, int], folder: str
                 ) -> tuple[str, dict[str, bytes], dict[str, Any]]:
    version = version_dir(sizes, folder)
    manifest = json.loads(read(rev, f"{version}/{MANIFEST_FILE}"))
    files = {name: read(rev, f"{version}/{name}") for name in manifest["files"]}
    return version, files, manifest


def dev_sentences(data: Path, pair: str, side: str, labels: Sequence[str], lines: int
                  ) -> list[tuple[str, str]]:
    out = []
    for label in labels:
        path = data / pair / "domains" / label / f"dev.{side}"
        if path.is_file():
            out += [(label, text) for text in path.read_text().splitlines()[:lines]]
    if not out:
        raise SystemExit(f"no dev sentences under {data / pair}/domains: give --data")
    return out


def compare_router(name: str, before: tuple[str, dict[str, bytes], dict[str, Any]],
                   after: tuple[str, dict[str, bytes], dict[str, Any]],
                   sentences: list[tuple[str, str]]) -> dict[str, Any]:
    models = [load_classifier(files, manifest["config"], version=manifest["version"])
              for _, files, manifest in (before, after)]
    differing, largest, right = 0, 0.0, [0, 0]
    for label, text in sentences:
        old, new = (model.posteriors(text) for model in models)
        largest = max(largest, max(abs(old[k] - new[k]) for k in old))
        differing += max(old, key=old.__getitem__) != max(new, key=new.__getitem__)
        for i, found in enumerate((old, new)):
            right[i] += max(found, key=found.__getitem__) == label
    return {"direction": name, "before": before[0], "after": after[0],
            "bytes_before": {k: len(v) for k, v in before[1].items()},
            "bytes_after": {k: len(v) for k, v in after[1].items()},
            "sentences": len(sentences), "argmax_differs": differing,
            "largest_posterior_change": largest,
            "accuracy_before": right[0] / len(sentences),
            "accuracy_after": right[1] / len(sentences)}


def estimator_file(sizes: dict[str, int], name: str) -> str:
    for suffix in (".json.xz", ".json"):
        if f"{BUILTIN}/quality/{name}{suffix}" in sizes:
            return f"{BUILTIN}/quality/{name}{suffix}"
    raise FileNotFoundError(f"no quality estimator of {name}")


def shared_router(data: Path, sizes: dict[str, int], run: Path, lines: int
                  ) -> dict[str, Any]:
    """en->fr's router and en->de's own on en->de's dev sentences (English), leaving out
    the lines either router trained on (en-fr's and en-de's train splits)."""
    _, files, manifest = router_files(None, sizes, ROUTERS["en-fr"][0])
    config = manifest["config"]
    models = {"en-fr router": load_classifier(files, config, version=manifest["version"]),
              "en-de router": load_classifier(
                  {CLASSIFIER_MODEL_FILE: (run / "classifier" / CLASSIFIER_MODEL_FILE)
                   .read_bytes()}, config, version=1)}
    right = dict.fromkeys(models, 0)
    total = 0
    for label in config["labels"]:
        folder = data / "en-de" / "domains" / label
        if not (folder / "dev.en").is_file():
            continue
        seen = {text for pair in ("en-fr", "en-de") for text in
                (data / pair / "domains" / label / "train.en").read_text().splitlines()}
        texts = [t for t in (folder / "dev.en").read_text().splitlines()[:lines] if t not in seen]
        for name, model in models.items():
            right[name] += sum(max(p, key=p.__getitem__) == label
                               for p in map(model.posteriors, texts))
        total += len(texts)
    return {"sentences": total, **{name: n / total for name, n in right.items()}}


def en_de_addition(sizes: dict[str, int], spm_bytes: int) -> dict[str, int]:
    """Bytes an en->de publication adds: its backbone and 7 adapters as the publish stage
    stores them (en->fr's shape, computed: repository_budget.py), its one vocabulary file
    (source.spm: the target vocabulary is the same), and an estimator, a card and
    manifests the size of en->fr's (the same recipe on as much data). No router: en->de
    routes with en->fr's (server/routing/shared_router.py)."""
    backbone = version_dir(sizes, "backbones/default-en-fr")
    config = BackboneConfig.from_dict(json.loads((REPO / backbone / "config.json").read_text()))
    return {"backbone": rb.backbone_weight_bytes(config),
            "vocabulary": spm_bytes,
            "adapters": rb.DOMAINS * rb.adapter_weight_bytes(config),
            "quality": sizes[estimator_file(sizes, "default-en-fr")],
            "card and manifests": sizes[f"{BUILTIN}/MODEL_CARD.md"] + 8 * 2_000}


def compare_backbone(name: str, old: dict[str, int], new: dict[str, int],
                     before: str | None) -> dict[str, Any]:
    """A backbone's files at `before` and now: the same fingerprint, the same weights and
    the same source and target vocabulary bytes (a shared vocabulary: the source's)."""
    found = []
    for rev, sizes in ((before, old), (None, new)):
        version = version_dir(sizes, f"backbones/{name}")
        manifest = json.loads(read(rev, f"{version}/{MANIFEST_FILE}"))
        spm, _ = target_vocabulary_files(manifest["files"])
        found.append({"version": version, "files": sorted(manifest["files"]),
                      "bytes": sum(sizes[f"{version}/{f}"] for f in manifest["files"]),
                      "fingerprint": manifest["backbone_fingerprint"],
                      "weights": manifest["files"]["model.safetensors"]["sha256"],
                      "source": manifest["files"][SOURCE_SPM_FILE]["sha256"],
                      "target": manifest["files"][spm]["sha256"]})
    was, now = found
    return {"backbone": name, "before": was["version"], "after": now["version"],
            "files_before": was["files"], "files_after": now["files"],
            "bytes_before": was["bytes"], "bytes_after": now["bytes"],
            "same": all(was[k] == now[k] for k in ("fingerprint", "weights", "source",
                                                   "target"))}


def measure(before: str, data: Path, lines: int, ende_run: Path | None) -> dict[str, Any]:
    old, new = tracked(before), tracked(None)
    routers = []
    for name, (folder, pair, side) in ROUTERS.items():
        pair_before = router_files(before, old, folder)
        pair_after = router_files(None, new, folder)
        labels = pair_after[2]["config"]["labels"]
        routers.append(compare_router(name, pair_before, pair_after,
                                      dev_sentences(data, pair, side, labels, lines)))
    quality = []
    for name in QUALITY:
        paths = estimator_file(old, name), estimator_file(new, name)
        estimators = [Estimator.from_json(read(rev, path))
                      for rev, path in zip((before, None), paths, strict=True)]
        quality.append({"backbone": name, "before": paths[0], "after": paths[1],
                        "bytes_before": old[paths[0]], "bytes_after": new[paths[1]],
                        "identical": estimators[0] == estimators[1]})
    backbones = [compare_backbone(name, old, new, before) for name in BACKBONES]
    spm = (ende_run / "spm.model" if ende_run else
           REPO / version_dir(new, "backbones/default-en-fr") / SOURCE_SPM_FILE)
    addition = en_de_addition(new, spm.stat().st_size)
    trained = ende_run is not None and (ende_run / "classifier" / CLASSIFIER_MODEL_FILE).is_file()
    sharing = shared_router(data, new, ende_run, lines) if ende_run and trained else None
    return {"before": before, "en_de_run": str(ende_run), "en_de_routers": sharing,
            "tracked_before": sum(old.values()),
            "tracked_after": sum(new.values()), "limit": LIMIT, "routers": routers,
            "quality": quality, "backbones": backbones, "en_de_addition": addition,
            "with_en_de": sum(new.values()) + sum(addition.values())}


def markdown(result: dict[str, Any]) -> str:
    mb = 1e6
    lines = ["# The built-in models' bytes in the repository", "",
             f"Tracked files: {result['tracked_before'] / mb:.2f} MB at `{result['before']}`, "
             f"{result['tracked_after'] / mb:.2f} MB now (limit {LIMIT / mb:.0f} MB).", "",
             "## Routers: `classifier.bin` xz-compressed, the same fastText model", "",
             "| router | version | classifier.bin | features.npz.xz | dev sentences | "
             "accuracy | argmax differs | largest posterior change |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["routers"]:
        name = CLASSIFIER_MODEL_FILE
        lines.append(
            f"| {r['direction']} | {r['before'].rsplit('/', 1)[1]} -> "
            f"{r['after'].rsplit('/', 1)[1]} | {r['bytes_before'][name] / mb:.2f} -> "
            f"{r['bytes_after'][name] / mb:.2f} MB | "
            f"{r['bytes_after']['features.npz.xz'] / mb:.2f} MB (as it was) | "
            f"{r['sentences']} | {100 * r['accuracy_before']:.2f}% -> "
            f"{100 * r['accuracy_after']:.2f}% | {r['argmax_differs']} | "
            f"{r['largest_posterior_change']:.1e} |")
    lines += ["", "## Quality estimators: xz-compressed JSON", "",
              "| backbone | file | bytes | the same estimator |", "|---|---|---|---|"]
    for q in result["quality"]:
        lines.append(f"| {q['backbone']} | {q['before'].rsplit('/', 1)[1]} -> "
                     f"{q['after'].rsplit('/', 1)[1]} | {q['bytes_before'] / mb:.3f} -> "
                     f"{q['bytes_after'] / mb:.3f} MB | {q['identical']} |")
    lines += ["", "## Backbones: one vocabulary file where the target vocabulary is the "
              "source one", "", "| backbone | version | files | bytes | the same fingerprint, "
              "weights and vocabularies |", "|---|---|---|---|---|"]
    for b in result.get("backbones", []):
        dropped = sorted(set(b["files_before"]) - set(b["files_after"]))
        lines.append(f"| {b['backbone']} | {b['before'].rsplit('/', 1)[1]} -> "
                     f"{b['after'].rsplit('/', 1)[1]} | "
                     f"{', '.join(dropped) + ' dropped' if dropped else 'as they were'} | "
                     f"{b['bytes_before'] / mb:.2f} -> {b['bytes_after'] / mb:.2f} MB | "
                     f"{b['same']} |")
    measured = "its run's vocabulary" if result["en_de_run"] != "None" else \
        "en->fr's vocabulary as its size"
    lines += ["", f"## Publishing en->de (weights computed for en->fr's shape, {measured}, "
              "en->fr's estimator as its size; no router: it routes with en->fr's)", "",
              "| part | MB |", "|---|---|"]
    for part, size in result["en_de_addition"].items():
        lines.append(f"| {part} | {size / mb:.2f} |")
    total = sum(result["en_de_addition"].values())
    lines += [f"| **all** | **{total / mb:.2f}** |", "",
              f"With en->de: {result['with_en_de'] / mb:.2f} MB of {LIMIT / mb:.0f} MB "
              f"({(LIMIT - result['with_en_de']) / mb:+.2f} MB left)."]
    sharing = result.get("en_de_routers")
    if sharing:
        lines += ["", "## Routing en->de's English with en->fr's router", "",
                  f"Accuracy on en->de's dev sentences ({sharing['sentences']}, the 7 domains, "
                  "lines of either router's train splits left out): "
                  f"en->fr's router {100 * sharing['en-fr router']:.1f}%, en->de's own "
                  f"{100 * sharing['en-de router']:.1f}%."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.builtin_size",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="git revision of the old storage")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--lines", type=int, default=150, help="dev sentences per domain")
    parser.add_argument("--ende-run", type=Path, help="en->de's run dir (see above)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    result = measure(args.before, args.data, args.lines, args.ende_run)
    paths = write_report(args.out, "builtin_size", result, markdown(result))
    print(paths[-1].read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
