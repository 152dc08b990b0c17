"""Marian / OPUS-MT import: convert -> load in the engine -> compare with Hugging Face."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import MarianMTModel

from converters.checks import Checker, ConversionError
from converters.marian import backbone_config, convert_marian
from server.decoding.search import SearchOptions
from server.engine.artifacts import build_engine
from server.engine.engine import Engine, Member, SentenceJob
from tests.converters.marian_fixture import marian_model, marian_vocab, save_marian

LOGIT_TOLERANCE = 1e-4


def sources(engine: Engine, count: int, seed: int = 1) -> list[list[int]]:
    """Random source ids (no pad, no EOS inside) ending with EOS, of varied lengths."""
    config, generator = engine.config, torch.Generator().manual_seed(seed)
    specials = {config.pad_id, config.eos_id}
    rows = []
    for row in range(count):
        ids = torch.randint(0, config.src_vocab_size, (4 + 2 * row,), generator=generator)
        rows.append([i for i in ids.tolist() if i not in specials] + [config.eos_id])
    return rows


def engine_greedy(engine: Engine, rows: list[list[int]], max_length: int) -> list[list[int]]:
    jobs = [SentenceJob(ids, (Member(None),), max_length) for ids in rows]
    return [hyps[0].tokens for hyps in engine.translate(jobs, SearchOptions(beam_size=1))]


def hf_greedy(model: MarianMTModel, ids: list[int], max_length: int) -> list[int]:
    output = model.generate(
        input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        num_beams=1, do_sample=False, max_new_tokens=max_length, min_length=0,
        forced_eos_token_id=None, bad_words_ids=None)[0].tolist()
    tokens = output[1:]  # drop the decoder start token
    eos = model.config.eos_token_id
    return tokens[: tokens.index(eos)] if eos in tokens else tokens


def padded_batch(engine: Engine, rows: list[list[int]]) -> torch.Tensor:
    batch = torch.full((len(rows), max(map(len, rows))), engine.config.pad_id)
    for index, row in enumerate(rows):
        batch[index, : len(row)] = torch.tensor(row)
    return batch


@pytest.mark.parametrize("layout", ["safetensors", "pytorch_model.bin"])
def test_logits_equal_hugging_face(layout: str, marian: MarianMTModel, marian_dir: Path,
                                   marian_bin_dir: Path) -> None:
    engine = build_engine(convert_marian(marian_dir if layout == "safetensors" else marian_bin_dir))
    source = padded_batch(engine, sources(engine, 4))  # padded rows exercise the masks
    generator = torch.Generator().manual_seed(2)
    target = torch.randint(0, engine.config.tgt_vocab_size, (4, 7), generator=generator)
    target[:, 0] = engine.config.decoder_start_id
    with torch.no_grad():
        ours = engine.model(source, target)
        theirs = marian(input_ids=source, attention_mask=(source != engine.config.pad_id).long(),
                        decoder_input_ids=target).logits
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max().item() < LOGIT_TOLERANCE


@pytest.mark.parametrize("layout", ["safetensors", "pytorch_model.bin"])
def test_greedy_tokens_equal_hugging_face_generate(layout: str, marian: MarianMTModel,
                                                   marian_dir: Path, marian_bin_dir: Path) -> None:
    engine = build_engine(convert_marian(marian_dir if layout == "safetensors" else marian_bin_dir))
    rows = sources(engine, 6)
    ours = engine_greedy(engine, rows, max_length=12)
    assert ours == [hf_greedy(marian, ids, 12) for ids in rows]
    assert len({tuple(tokens) for tokens in ours}) > 1  # outputs depend on the input


def test_both_layouts_give_identical_artifacts(marian_dir: Path, marian_bin_dir: Path) -> None:
    assert convert_marian(marian_dir) == convert_marian(marian_bin_dir)


def test_vocabulary_is_written_in_id_order(marian_dir: Path) -> None:
    files = convert_marian(marian_dir)
    vocab = marian_vocab()
    lines = files["source.vocab"].decode().split("\n")[:-1]
    assert lines == sorted(vocab, key=vocab.__getitem__)
    # one spm model and one vocab.json for both sides: shipped once (no target files)
    assert "target.vocab" not in files and "target.spm" not in files
    config = json.loads(files["config.json"])
    assert (config["pad_id"], config["eos_id"], config["unk_id"]) == (len(vocab) - 1, 0, 1)
    assert config["positions"] == "sinusoidal" and config["output_bias"] is True


def test_separate_embeddings_with_tied_output(tmp_path: Path) -> None:
    model = marian_model(activation="relu", shared=False, seed=3)
    files = convert_marian(save_marian(model, tmp_path))
    assert json.loads(files["config.json"])["shared_embeddings"] == "decoder"
    engine = build_engine(files)
    rows = sources(engine, 4)
    assert engine_greedy(engine, rows, 10) == [hf_greedy(model, ids, 10) for ids in rows]


def test_separate_target_vocabulary_file(tmp_path: Path) -> None:
    model = marian_model(activation="gelu", shared=False, seed=4)
    path = save_marian(model, tmp_path)
    pieces = sorted(marian_vocab(), key=marian_vocab().__getitem__)
    pieces[2], pieces[3] = pieces[3], pieces[2]  # a target vocabulary in another order
    (path / "target_vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    files = convert_marian(path)
    assert files["target.vocab"].decode().split("\n")[:-1] == pieces
    assert files["source.vocab"] != files["target.vocab"]
    engine = build_engine(files)
    rows = sources(engine, 3)
    assert engine_greedy(engine, rows, 8) == [hf_greedy(model, ids, 8) for ids in rows]


def test_malformed_directory_reports_every_problem(marian_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("source.spm", "target.spm", "vocab.json"):
        (broken / name).write_bytes((marian_dir / name).read_bytes())
    config = json.loads((marian_dir / "config.json").read_text())
    config |= {"activation_function": "mish", "normalize_before": True}
    (broken / "config.json").write_text(json.dumps(config))
    tensors = load_file(marian_dir / "model.safetensors")
    del tensors["model.encoder.layers.1.fc2.weight"]
    tensors["model.decoder.layers.0.fc1.bias"] = torch.zeros(3)
    save_file(tensors, broken / "model.safetensors")
    with pytest.raises(ConversionError) as caught:
        convert_marian(broken)
    message = str(caught.value)
    assert "activation_function='mish' is not supported (supported: relu, gelu" in message
    assert "normalize_before=True is not supported (supported: False)" in message
    assert "missing tensor 'model.encoder.layers.1.fc2.weight'" in message
    assert "'model.decoder.layers.0.fc1.bias' has shape [3], expected [64]" in message
    assert len(caught.value.problems) == 4


def test_missing_files_are_listed_together(tmp_path: Path) -> None:
    with pytest.raises(ConversionError) as caught:
        convert_marian(tmp_path)
    problems = "; ".join(caught.value.problems)
    for name in ("config.json", "source.spm", "target.spm", "vocab.json"):
        assert f"missing file {name}" in problems
    assert "no weights" in problems


def test_untied_copy_that_differs_is_reported(marian: MarianMTModel, tmp_path: Path) -> None:
    path = save_marian(marian, tmp_path, binary=True)
    state = torch.load(path / "pytorch_model.bin", weights_only=True)
    state["lm_head.weight"] = state["lm_head.weight"].clone() + 1.0
    torch.save(state, path / "pytorch_model.bin")
    with pytest.raises(ConversionError, match="'lm_head.weight' should be tied"):
        convert_marian(path)


@pytest.mark.parametrize(("activation", "expected"), [
    ("swish", "swish"), ("silu", "swish"), ("gelu", "gelu"), ("gelu_new", "gelu_tanh"),
    ("relu", "relu")])
def test_activation_mapping(activation: str, expected: str) -> None:
    vocab = list(marian_vocab())
    hf = json.loads(marian_model().config.to_json_string()) | {"activation_function": activation}
    check = Checker("test")
    config = backbone_config(hf, source_vocab=vocab, target_vocab=vocab, check=check)
    assert check.problems == []
    assert config is not None and config.activation == expected
