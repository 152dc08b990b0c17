"""Storage layer for artifacts (backbones, domain modules, classifiers).

See `store.py` for atomic publication and layering, and docs/ARCHITECTURE.md
("Artifacts (model_store)") for the manifest contract.
"""

from contract.artifacts import FINGERPRINT_FILES
from contract.manifest import KINDS, REQUIRED_FILES, ArtifactKind, FileEntry, Manifest
from contract.tensors import check_safetensors

from .admin_pages import CreatedKey, Page, Viewer
from .archive import pack_artifact_dir, unpack_artifact
from .artifact import ArtifactId, LoadedArtifact, build_manifest, load_safetensors, verify_artifact
from .artifact_pages import ArtifactPage, ArtifactRecord
from .errors import ArtifactError, ConflictError, NotFoundError, StoreError
from .glossary_rows import GlossaryRecord
from .gunzip import InflationError
from .hashing import backbone_fingerprint, canonical_json, sha256_hex
from .jobs import Job, JobState
from .memory_gate_rows import GateRecord
from .memory_import_rows import MemoryImport
from .memory_rows import MemoryChange, MemoryRecord, NewPair, PairRecord
from .registry import Event, Registry
from .storage import LocalStorage, Storage
from .store import BUILTIN_DIR, PublishHook, PublishStep, Store

__all__ = [
    "BUILTIN_DIR",
    "FINGERPRINT_FILES",
    "KINDS",
    "REQUIRED_FILES",
    "ArtifactError",
    "ArtifactId",
    "ArtifactKind",
    "ArtifactPage",
    "ArtifactRecord",
    "ConflictError",
    "CreatedKey",
    "Event",
    "FileEntry",
    "GateRecord",
    "GlossaryRecord",
    "InflationError",
    "Job",
    "JobState",
    "LoadedArtifact",
    "LocalStorage",
    "Manifest",
    "MemoryChange",
    "MemoryImport",
    "MemoryRecord",
    "NewPair",
    "NotFoundError",
    "Page",
    "PairRecord",
    "PublishHook",
    "PublishStep",
    "Registry",
    "Storage",
    "Store",
    "StoreError",
    "Viewer",
    "backbone_fingerprint",
    "build_manifest",
    "canonical_json",
    "check_safetensors",
    "load_safetensors",
    "pack_artifact_dir",
    "sha256_hex",
    "unpack_artifact",
    "verify_artifact",
]
