"""The artifact and job contract shared by the server, the trainer, the converters and the
model store: artifact kinds and file names (`artifacts`), the manifest (`manifest`), the
backbone's configuration (`backbone`), module family configurations (`families`),
safetensors bytes (`tensors`), training options and job configs (`training`) and the
parallel-text upload format (`tsv`).

Torch-free on import: the registry, the sidecar's job loop and the API validate with it
without loading torch. Readers and writers ask this package; nothing else spells a file
name or a manifest field.
"""
