from __future__ import annotations

import hashlib

import numpy as np

from semhash_llm.config import NormalizeConfig, ShingleConfig
from semhash_llm.text import normalize, shingle_hashes, tokens
from semhash_llm.text.normalize import CharClass, char_classes, normalize_batch
from semhash_llm.text.tokenize import tokenize_batch


def test_nfkc_and_case_folding() -> None:
    assert normalize("ＡＢＣ ﬁ Straße") == "abc fi strasse"
    assert normalize("ＡＢＣ", NormalizeConfig(unicode_form="none", lowercase=False)) == "ＡＢＣ"


def test_punctuation_and_whitespace_fold_into_boundaries() -> None:
    assert tokens("Hello,   world!!\n\tThe end...") == ["hello", "world", "the", "end"]
    assert tokens("snake_case and don't") == ["snake", "case", "and", "don", "t"]
    kept = tokens("Hi, you!", NormalizeConfig(strip_punctuation=False))
    assert kept == ["hi", ",", "you", "!"]


def test_cjk_and_thai_become_character_tokens() -> None:
    assert tokens("我爱北京") == ["我", "爱", "北", "京"]
    assert tokens("カタカナとひらがな") == list("カタカナとひらがな")
    assert tokens("ภาษาไทย") == list("ภาษาไทย")
    # Hangul is written with spaces: words stay words.
    assert tokens("한국어 문장") == ["한국어", "문장"]
    # Mixed: Latin words stay whole, ideographs split.
    assert tokens("GPT模型 test") == ["gpt", "模", "型", "test"]


def test_char_classes_table() -> None:
    table = char_classes(True)
    assert table.shape[0] == 0x110000
    assert table[ord("a")] == CharClass.WORD
    assert table[ord("7")] == CharClass.WORD
    assert table[ord(" ")] == CharClass.SEPARATOR
    assert table[ord("—")] == CharClass.SEPARATOR
    assert table[ord("中")] == CharClass.NO_SPACE


def test_cjk_text_is_not_one_shingle() -> None:
    text = "我爱北京天安门天安门上太阳升"
    sh = shingle_hashes(text, shingle=ShingleConfig(char_ngram=3))
    assert sh.size == len(text) - 3 + 1 - 1  # "天安门" occurs twice: one distinct shingle fewer
    sh5 = shingle_hashes(text)
    assert sh5.size > 5


def test_word_ngrams_and_short_documents() -> None:
    assert shingle_hashes("a b c d e f g").size == 3  # 7 words, 5-grams
    assert shingle_hashes("only three words").size == 1
    assert shingle_hashes("!!! ???").size == 0


def test_shingles_ignore_case_and_punctuation() -> None:
    a = shingle_hashes("The quick brown fox jumps over the lazy dog.")
    b = shingle_hashes("the QUICK brown fox -- jumps over the lazy dog")
    assert np.array_equal(a, b)


def test_shingle_hash_is_order_sensitive() -> None:
    a = shingle_hashes("one two three four five")
    b = shingle_hashes("five four three two one")
    assert not np.array_equal(a, b)


def _digests(texts: list[str]) -> list[bytes]:
    ncfg = NormalizeConfig()
    batch = tokenize_batch(normalize_batch(texts, ncfg), char_classes(ncfg.strip_punctuation), ShingleConfig())
    return [int(h).to_bytes(8, "big") + int(lo).to_bytes(8, "big")
            for h, lo in zip(batch.digest_hi.tolist(), batch.digest_lo.tolist())]


def test_exact_key_is_blake2b_of_the_whitespace_collapsed_normalized_text() -> None:
    """The exact stage's key is cryptographic: BLAKE2b-128 of the NFKC, case-folded text with
    whitespace runs collapsed. A non-cryptographic digest (FNV-1a) lets an adversary craft a text
    with the digest of a chosen document and so get it deleted; BLAKE2b makes that infeasible."""
    texts = ["Hello, World!  café 中文 ok", "The end.", "ǅ ﬁ Straße 😀 tail", ""]
    for text, digest in zip(texts, _digests(texts)):
        canon = " ".join(normalize(text).split()).encode("utf-8")
        assert digest == hashlib.blake2b(canon, digest_size=16, person=b"semhash-exact").digest()


def test_exact_key_folds_whitespace_width_and_case_only() -> None:
    """Issue 24.4: every non-space character keeps its identity. Code and price pages that differ
    in one symbol are not exact copies (LSH, which confirms, decides looser matches)."""
    same = _digests(["Hello, world!", "hello,   WORLD!", "  HELLO,\tworld!\n", "Ｈｅｌｌｏ, world!"])
    assert len(set(same)) == 1
    for a, b in (("if a = b: x()", "if a == b: x()"), ("I write C++ daily.", "I write C# daily."),
                 ("Price: $5 per month", "Price: €5 per month"), ("x += 1;", "x -= 1;"),
                 ("Hello, world!", "Hello world"), ("state-of-the-art", "state of the art"),
                 ("ab c", "a bc"), ("😀 !!", "😀!!"), ("3.14", "3,14")):
        da, db = _digests([a, b])
        assert da != db, (a, b)
