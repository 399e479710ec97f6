"""Property-based tests (hypothesis) of the readers, the normalizer, the shingler and the passage
splitter: arbitrary Unicode, control characters, invalid UTF-8, empty and long inputs — no crash,
offsets stay valid, the same input gives the same output (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from semhash_llm.config import NormalizeConfig, ReaderConfig, ShingleConfig  # noqa: E402
from semhash_llm.io.readers import InputError, iter_batches, scan_inputs  # noqa: E402
from semhash_llm.text.normalize import char_classes, normalize, normalize_batch  # noqa: E402
from semhash_llm.text.passages import passages_batch  # noqa: E402
from semhash_llm.text.tokenize import tokenize_batch  # noqa: E402

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Every code point class that has bitten text tools: controls, surrogates are not str-able but
# lone combining marks, bidi controls, zero-width joiners, CJK, emoji, private use are.
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)
mixed = st.one_of(
    texts,
    st.text(alphabet=st.sampled_from(list("ab c\n\t.。!?\u200b\u200d\u202e\u0301\x00\x07\ufeff漢字かな😀")), max_size=300),
    st.just(""),
    st.builds(lambda w, n: " ".join([w] * n), st.text(min_size=1, max_size=12), st.integers(1, 400)),
)


@FUZZ
@given(st.lists(mixed, max_size=6), st.booleans())
def test_normalize_and_shingle_any_text(batch: list[str], strip: bool) -> None:
    cfg = NormalizeConfig(strip_punctuation=strip)
    normalized = normalize_batch(batch, cfg)
    assert len(normalized) == len(batch)
    assert normalized == [normalize(t, cfg) for t in batch]  # batch and single agree
    tb = tokenize_batch(normalized, char_classes(strip), ShingleConfig())
    off = tb.tok_offsets
    assert off.shape == (len(batch) + 1,) and off[0] == 0 and np.all(np.diff(off) >= 0)
    assert off[-1] == tb.tok_hashes.shape[0]
    assert tb.digest_hi.shape == tb.digest_lo.shape == (len(batch),)
    again = tokenize_batch(normalize_batch(batch, cfg), char_classes(strip), ShingleConfig())
    assert np.array_equal(again.tok_hashes, tb.tok_hashes) and np.array_equal(again.digest_hi, tb.digest_hi)
    # equal texts get equal digests, wherever they sit in the batch
    for i, t in enumerate(batch):
        j = batch.index(t)
        assert tb.digest_hi[i] == tb.digest_hi[j] and tb.digest_lo[i] == tb.digest_lo[j]


@FUZZ
@given(st.lists(mixed, max_size=5))
def test_passages_stay_inside_their_texts(batch: list[str]) -> None:
    pb = passages_batch(batch)
    assert pb.num_docs == len(batch)
    n = len(pb)
    assert pb.start.shape == pb.end.shape == pb.doc.shape == (n,)
    if n:
        assert np.all((pb.doc >= 0) & (pb.doc < len(batch)))
        lengths = np.array([len(t) for t in batch])[pb.doc]
        assert np.all((pb.start >= 0) & (pb.start < pb.end) & (pb.end <= lengths))
        order = np.lexsort((pb.start, pb.doc))
        assert np.array_equal(order, np.arange(n))  # sorted by document, then start
        assert np.all(pb.ntok >= 1)
    again = passages_batch(batch)
    assert np.array_equal(again.exact_hi, pb.exact_hi) and np.array_equal(again.start, pb.start)


records = st.one_of(
    st.dictionaries(st.sampled_from(["id", "text", "other"]),
                    st.one_of(texts, st.integers(), st.none(), st.lists(st.integers(), max_size=2), st.booleans()),
                    max_size=3),
    texts,  # a JSON string, not an object
    st.integers(),
)


@FUZZ
@given(st.lists(st.one_of(records.map(lambda r: json.dumps(r).encode()), st.binary(max_size=60)), max_size=12),
       st.booleans())
def test_jsonl_reader_never_loses_a_line(tmp_path_factory: pytest.TempPathFactory, lines: list[bytes],
                                         trailing_newline: bool) -> None:
    """Whatever the bytes (invalid UTF-8, junk, objects of the wrong shape): with on_error=skip
    every record is either read or counted as skipped with a reason; with raise, the error is an
    InputError naming the file."""
    lines = [ln.replace(b"\n", b" ").replace(b"\r", b" ") for ln in lines]
    path = Path(tmp_path_factory.mktemp("fuzz")) / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if trailing_newline and lines else b""))
    files = scan_inputs([path]).files
    seen = 0
    skipped = 0
    for batch in iter_batches(files, ReaderConfig(on_error="skip")):
        assert len(batch.texts) == len(batch.errors) == len(batch.ids) == len(batch.ordinals)
        for text, err in zip(batch.texts, batch.errors):
            assert (text is None) == (err is not None)
            skipped += err is not None
            if text is not None:
                assert isinstance(text, str) and text
        seen += len(batch)
    non_blank = sum(1 for ln in lines if ln.strip())
    assert seen == non_blank  # one row per non-blank line: read, or skipped with its reason
    try:
        for _batch in iter_batches(files, ReaderConfig(on_error="raise")):
            pass
    except InputError as exc:
        assert "in.jsonl" in str(exc)
        assert skipped > 0
    else:
        assert skipped == 0
