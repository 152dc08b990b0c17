"""Import external checkpoints into the model store and export backbones to CTranslate2.

- `converters.marian.convert_marian(src_dir)`: Hugging Face Marian / OPUS-MT -> backbone files
- `converters.opennmt.convert_opennmt(checkpoint, source_spm=, target_spm=)`: OpenNMT-py
- `converters.ct2.export_ct2(files, out_dir, quantization=)`: backbone -> CTranslate2
- `converters.ct2.export_ct2_domain(backbone_files, module_config, module_params, out_dir)`:
  backbone + mergeable module (e.g. `ldr`) -> CTranslate2
- `python -m converters --help`: the same through the model store

Every importer raises `ConversionError` listing every problem at once. The modules are
imported on demand: `ct2` needs the optional `ctranslate2` package.
"""

from converters.checks import ConversionError

__all__ = ["ConversionError"]
