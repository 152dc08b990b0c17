"""The tokenizer encodes text by text (sentencepiece's list form starts a thread pool per
call); the ids must be exactly those of sentencepiece's own batch encoding."""

from __future__ import annotations

import sentencepiece as spm

from server.engine.tokenizer import Tokenizer
from tests.tiny import spm_bytes

TEXTS = ["Take one tablet twice a day.", "", "Article 3 of the Regulation", "ünïcödé ✓ 42"]


def test_encode_gives_sentencepiece_batch_ids_plus_eos() -> None:
    proto = spm_bytes()
    reference = spm.SentencePieceProcessor(model_proto=proto).encode(TEXTS)
    tokenizer = Tokenizer(proto, vocab=None, eos_id=3, unk_id=1, pad_id=0)
    assert tokenizer.encode(TEXTS) == [ids + [3] for ids in reference]
    assert tokenizer.encode(TEXTS, add_eos=False) == reference
    assert tokenizer.encode([]) == []


def test_encode_through_a_piece_vocabulary_maps_unknown_pieces_to_unk() -> None:
    proto = spm_bytes()
    pieces = spm.SentencePieceProcessor(model_proto=proto).encode(TEXTS, out_type=str)
    vocab = sorted({p for text in pieces for p in text})[1:]  # one piece left out: unknown
    eos, unk = len(vocab), len(vocab) + 1
    tokenizer = Tokenizer(proto, vocab=vocab, eos_id=eos, unk_id=unk, pad_id=len(vocab) + 2)
    index = {p: i for i, p in enumerate(vocab)}
    assert tokenizer.encode(TEXTS) == [[index.get(p, unk) for p in text] + [eos]
                                       for text in pieces]
    assert any(unk in ids for ids in tokenizer.encode(TEXTS))
