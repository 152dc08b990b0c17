"""`python -m converters`: import checkpoints into the model store, export to CTranslate2.

Importers write only through `model_store` (a new version of a backbone artifact);
exporters read verified artifacts from the store and write a CTranslate2 directory.
User mistakes print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from contract.artifacts import BACKBONE_CONFIG_FILE
from model_store import LoadedArtifact, Manifest, StoreError
from model_store.store import Store

STORE_ENV = "NMT_STORE_DIR"
USAGE_ERROR = 2

Command = Callable[[argparse.Namespace], str]

EXAMPLES = """examples:
  python -m converters import-marian ./opus-mt-en-fr --store var/store --name en-fr --activate
  python -m converters import-opennmt model.pt --source-spm src.spm --target-spm tgt.spm \\
      --store var/store --name en-de
  python -m converters export-ct2 --store var/store --backbone en-fr --quantization int8 out/
  python -m converters export-ct2-domain --store var/store --domain medical out-medical/
"""


class CliError(Exception):
    """A user mistake the CLI reports in one line."""


def _store(args: argparse.Namespace) -> Store:
    return Store.open(Path(args.store))


def _publish(args: argparse.Namespace, files: dict[str, bytes], provenance: dict[str, Any]) -> str:
    if args.languages:
        source, target = args.languages
        provenance = {**provenance, "languages": {"source": source, "target": target}}
    with _store(args) as store:
        manifest = store.publish("backbone", args.name, files,
                                 config=json.loads(files[BACKBONE_CONFIG_FILE]),
                                 provenance=provenance)
        if args.activate:
            store.activate("backbone", manifest.name, manifest.version)
    state = "active" if args.activate else "not active"
    return (f"published {manifest.label} ({state}); "
            f"fingerprint {manifest.backbone_fingerprint[:12]}")


# Commands import their converter on use: `--help` stays fast and the optional
# `ctranslate2` package is needed only by the exporters.
def import_marian(args: argparse.Namespace) -> str:
    from converters.marian import convert_marian

    source = Path(args.src_dir).resolve()
    files = convert_marian(source)
    return _publish(args, files, {"format": "huggingface-marian", "source": str(source)})


def import_opennmt(args: argparse.Namespace) -> str:
    from converters.opennmt import convert_opennmt

    checkpoint = Path(args.checkpoint).resolve()
    files = convert_opennmt(checkpoint, source_spm=Path(args.source_spm),
                            target_spm=Path(args.target_spm))
    return _publish(args, files, {"format": "opennmt-py", "source": str(checkpoint)})


def export_ct2_backbone(args: argparse.Namespace) -> str:
    from converters.ct2 import export_ct2

    with _store(args) as store:
        loaded = store.load("backbone", args.backbone, args.version)
    out = export_ct2(loaded.files, Path(args.out_dir), quantization=args.quantization)
    return f"exported {loaded.label} to {out}"


def backbone_for(store: Store, module: Manifest) -> LoadedArtifact:
    """The backbone a module was built for: the one with its fingerprint, or a compact
    re-store of that one (model_store/compact.py), active first, then the newest."""
    from model_store.compact import served_fingerprints

    wanted = module.backbone_fingerprint
    active = store.registry.active_versions("backbone")
    matching = [r for r in store.registry.list_artifacts("backbone")
                if wanted in served_fingerprints(r.manifest)]
    if not matching:
        raise CliError(f"{module.label} was built for backbone {wanted[:12]}, which is not "
                       "in the store")
    best = min(matching, key=lambda r: (active.get(r.name) != r.version, -r.version))
    return store.load("backbone", best.name, best.version, expected_fingerprint=best.fingerprint)


def export_ct2_module(args: argparse.Namespace) -> str:
    from converters.ct2 import export_ct2_domain
    from server.engine.artifacts import module_params

    with _store(args) as store:
        module = store.load("module", args.domain, args.version)
        backbone = backbone_for(store, module.manifest)
    out = export_ct2_domain(backbone.files, module.manifest.config, module_params(module.files),
                            Path(args.out_dir), quantization=args.quantization)
    return f"exported {module.label} merged into {backbone.label} to {out}"


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=os.environ.get(STORE_ENV),
                        help=f"model store directory (default: ${STORE_ENV})")


def _importer(sub: Any, name: str, command: Command, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
    _common(parser)
    parser.add_argument("--name", required=True, help="backbone name in the store")
    parser.add_argument("--activate", action="store_true",
                        help="make the new version the active one")
    parser.add_argument("--languages", type=language_pair_argument, metavar="SRC-TGT",
                        help="the languages it translates, ISO 639-1 (e.g. en-de), as the "
                             "LibreTranslate API lists them (default: the name's -SRC-TGT "
                             "ending)")
    parser.set_defaults(command=command)
    return parser


def language_pair_argument(value: str) -> tuple[str, str]:
    from server.textproc.languages import is_language_code

    source, _, target = value.partition("-")
    if not (is_language_code(source) and is_language_code(target)):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not SRC-TGT with two ISO 639-1 codes, e.g. en-de")
    return source, target


def _exporter(sub: Any, name: str, command: Command, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
    _common(parser)
    parser.add_argument("--version", type=int, help="artifact version (default: the active one)")
    parser.add_argument("--quantization", help="CTranslate2 weight type, e.g. int8 or float16")
    parser.add_argument("out_dir", metavar="OUT_DIR",
                        help="CTranslate2 model directory to create (absent or empty)")
    parser.set_defaults(command=command)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nmt-convert", epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Import Marian / OpenNMT-py checkpoints into the model store as backbones; "
                    "export backbones (and mergeable domain modules) to CTranslate2.")
    sub = parser.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    marian = _importer(sub, "import-marian", import_marian, "import a Hugging Face Marian / "
                       "OPUS-MT checkpoint directory as a new backbone version")
    marian.add_argument("src_dir", metavar="SRC_DIR", help="config.json, model.safetensors or "
                        "pytorch_model.bin, source.spm, target.spm, vocab.json")
    opennmt = _importer(sub, "import-opennmt", import_opennmt, "import an OpenNMT-py "
                        "Transformer checkpoint (.pt with plain-typed contents)")
    opennmt.add_argument("checkpoint", metavar="CHECKPOINT", help="OpenNMT-py .pt checkpoint")
    opennmt.add_argument("--source-spm", required=True, help="source sentencepiece model")
    opennmt.add_argument("--target-spm", required=True, help="target sentencepiece model")
    backbone = _exporter(sub, "export-ct2", export_ct2_backbone,
                         "export a backbone to a CTranslate2 model directory")
    backbone.add_argument("--backbone", required=True, help="backbone name in the store")
    domain = _exporter(sub, "export-ct2-domain", export_ct2_module, "export a domain's "
                       "module merged into its backbone (mergeable families only, e.g. ldr)")
    domain.add_argument("--domain", required=True, help="domain (module name) in the store")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if not args.store:  # before any work: every command reads or writes the store
            raise CliError(f"no model store: pass --store or set {STORE_ENV}")
        message = args.command(args)
    except (CliError, StoreError, ValueError, OSError) as error:
        # ConversionError, ExportError, ConfigError and ModuleConfigError are ValueErrors.
        sys.stderr.write(f"error: {' '.join(str(error).split())}\n")
        return USAGE_ERROR
    sys.stdout.write(message + "\n")
    return 0
