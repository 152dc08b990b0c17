"""CTranslate2 export: convert -> export -> translate with CTranslate2 -> the same greedy
tokens as the engine (post-norm Marian, pre-norm OpenNMT-py, merged `ldr`, `sf` and `pa`
modules)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ctranslate2
import numpy as np
import pytest
import torch

from converters.ct2 import ExportError, export_ct2, export_ct2_domain, spec_variables, tokens
from converters.marian import convert_marian
from converters.opennmt import convert_opennmt
from server.decoding.search import SearchOptions
from server.engine.artifacts import backbone_parts, build_engine
from server.engine.engine import Engine, Member, SentenceJob
from server.engine.layers import sinusoidal_table
from tests.tiny import random_module, tiny_backbone_files, tiny_config

MAX_LENGTH = 12


def sources(engine: Engine, count: int = 6) -> list[list[int]]:
    config, generator = engine.config, torch.Generator().manual_seed(7)
    specials = {config.pad_id, config.eos_id, config.decoder_start_id}
    rows = []
    for row in range(count):
        ids = torch.randint(0, config.src_vocab_size, (3 + 2 * row,), generator=generator)
        rows.append([i for i in ids.tolist() if i not in specials] + [config.eos_id])
    return rows


def engine_tokens(engine: Engine, rows: list[list[int]],
                  member: str | None = None) -> list[list[int]]:
    jobs = [SentenceJob(ids, (Member(member),), MAX_LENGTH) for ids in rows]
    return [hyps[0].tokens for hyps in engine.translate(jobs, SearchOptions(beam_size=1))]


def ct2_log_probs(model_dir: Path, engine: Engine, rows: list[list[int]],
                  targets: list[list[int]]) -> np.ndarray:
    """CTranslate2's per-token log-probabilities of `targets` (engine ids), concatenated."""
    source_vocab, target_vocab = tokens(engine.source_tokenizer), tokens(engine.target_tokenizer)
    translator = ctranslate2.Translator(str(model_dir), device="cpu", inter_threads=1)
    results = translator.score_batch([[source_vocab[i] for i in ids] for ids in rows],
                                     [[target_vocab[i] for i in ids] for ids in targets])
    return np.concatenate([np.asarray(r.log_probs) for r in results])


def ct2_tokens(model_dir: Path, engine: Engine, rows: list[list[int]]) -> list[list[int]]:
    """CTranslate2 greedy output as engine ids (token strings both ways)."""
    source_vocab = tokens(engine.source_tokenizer)
    target_ids = {piece: i for i, piece in enumerate(tokens(engine.target_tokenizer))}
    translator = ctranslate2.Translator(str(model_dir), device="cpu", inter_threads=1)
    results = translator.translate_batch(
        [[source_vocab[i] for i in ids] for ids in rows], beam_size=1,
        max_decoding_length=MAX_LENGTH)
    return [[target_ids[piece] for piece in result.hypotheses[0]] for result in results]


def test_marian_export_matches_engine(marian_dir: Path, tmp_path: Path) -> None:
    files = convert_marian(marian_dir)
    engine = build_engine(files)
    out = export_ct2(files, tmp_path / "ct2")
    rows = sources(engine)
    ours = engine_tokens(engine, rows)
    assert ct2_tokens(out, engine, rows) == ours
    assert len({tuple(t) for t in ours}) > 1


def test_opennmt_pre_norm_export_matches_engine(opennmt_path: Path, spm_path: Path,
                                                tmp_path: Path) -> None:
    files = convert_opennmt(opennmt_path, source_spm=spm_path, target_spm=spm_path)
    engine = build_engine(files)
    out = export_ct2(files, tmp_path / "ct2")
    rows = sources(engine)
    assert ct2_tokens(out, engine, rows) == engine_tokens(engine, rows)


def test_export_passes_the_engine_position_table(opennmt_path: Path, spm_path: Path,
                                                 tmp_path: Path) -> None:
    """CTranslate2's own table (tensor2tensor: step log(1e4)/(d/2-1), positions from 1)
    differs from both Marian's and OpenNMT-py's, so the export always carries one."""
    files = convert_opennmt(opennmt_path, source_spm=spm_path, target_spm=spm_path)
    parts = backbone_parts(files)
    table = spec_variables(parts.config, parts.tensors)["encoder/position_encodings/encodings"]
    assert np.array_equal(table, sinusoidal_table(5000, 32, interleaved=True).numpy())
    half = np.arange(16)
    scaled = np.arange(1, 5001)[:, None] * np.exp(-half * np.log(10000.0) / (16 - 1))
    ct2_default = np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)
    assert np.abs(table - ct2_default).max() > 0.5
    config = json.loads((export_ct2(files, tmp_path / "ct2") / "config.json").read_text())
    assert config["layer_norm_epsilon"] == pytest.approx(1e-6)
    assert config["decoder_start_token"] == "<s>" and config["eos_token"] == "</s>"


def test_spm_ids_backbone_with_learned_positions(tmp_path: Path) -> None:
    """No vocabulary files: CTranslate2 gets the sentencepiece pieces; learned positions."""
    files = tiny_backbone_files(tiny_config(positions="learned", shared_embeddings="none",
                                            output_bias=True, activation="gelu"), seed=3)
    engine = build_engine(files)
    out = export_ct2(files, tmp_path / "ct2")
    rows = sources(engine)
    assert ct2_tokens(out, engine, rows) == engine_tokens(engine, rows)


def test_int8_export_loads_and_mostly_agrees(marian_dir: Path, tmp_path: Path) -> None:
    files = convert_marian(marian_dir)
    engine = build_engine(files)
    out = export_ct2(files, tmp_path / "int8", quantization="int8")
    full = export_ct2(files, tmp_path / "float32")
    assert (out / "model.bin").stat().st_size < 0.6 * (full / "model.bin").stat().st_size
    rows = sources(engine)
    assert all(ct2_tokens(out, engine, rows))  # it loads and translates
    # Greedy outputs of a random tiny model diverge under int8 on CPUs without VNNI (AVX2),
    # so compare scores instead: int8 log-probs of the float engine's own output follow
    # the float32 export's closely (measured: correlation 0.93 on AVX2).
    best = engine_tokens(engine, rows)
    quantized, exact = ct2_log_probs(out, engine, rows, best), ct2_log_probs(full, engine, rows,
                                                                             best)
    assert np.corrcoef(quantized, exact)[0, 1] > 0.8


# Mergeable families: ldr (own input embeddings), sf (own k/v, the ffn matrix folded into
# fc2), pa (own q/k/v/o in every attention). The module starts from the backbone's weights.
@pytest.mark.parametrize(("family", "std", "options"), [
    ("ldr", 1.0, {"rank": 4}), ("sf", 0.2, {}), ("sf", 0.2, {"ffn_matrix": False}),
    ("pa", 0.2, {}), ("pa", 0.2, {"ffn_matrix": True})])
def test_mergeable_domain_export_matches_engine_with_module(
        marian_dir: Path, tmp_path: Path, family: str, std: float,
        options: dict[str, Any]) -> None:
    files = convert_marian(marian_dir)
    engine = build_engine(files)
    module_config, params = random_module(engine.config, family, seed=11, std=std,
                                          weights=engine.model.state_dict(), **options)
    engine.register_module("medical", module_config, params)
    rows = sources(engine)
    with_module = engine_tokens(engine, rows, "medical")
    assert with_module != engine_tokens(engine, rows)  # the module changes the outputs
    out = export_ct2_domain(files, module_config, params, tmp_path / "medical")
    assert ct2_tokens(out, engine, rows) == with_module


def test_residual_adapter_export_is_refused(tmp_path: Path) -> None:
    files = tiny_backbone_files()
    module_config, params = random_module(tiny_config(), "adapter", seed=1, bottleneck=8)
    with pytest.raises(ExportError, match="cannot export a 'adapter' module to CTranslate2: "
                                          "a residual adapter adds a non-linear block"):
        export_ct2_domain(files, module_config, params, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_module_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    module_config, params = random_module(tiny_config(d_model=64), "ldr", seed=1)
    with pytest.raises(ExportError, match="does not fit the backbone"):
        export_ct2_domain(tiny_backbone_files(), module_config, params, tmp_path / "out")


def test_non_empty_output_and_bad_quantization_are_refused(tmp_path: Path) -> None:
    files = tiny_backbone_files()
    with pytest.raises(ExportError, match="quantization 'int3' is not supported"):
        export_ct2(files, tmp_path / "a", quantization="int3")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "keep.txt").write_text("x")
    with pytest.raises(ExportError, match="not an empty directory"):
        export_ct2(files, tmp_path / "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]  # no partial directories left
