"""Passages (text/passages.py): cutting, offsets into the original text, exact and near keys."""

from __future__ import annotations

import hashlib
import random
import re

import numpy as np
import pytest

import semhash_llm.text.passages as passages_mod
from semhash_llm.config import ConfigError, NormalizeConfig, ShingleConfig
from semhash_llm.text import normalize, tokens
from semhash_llm.text.normalize import char_classes, normalize_batch
from semhash_llm.text.passages import KIND_SENTENCES, KIND_WINDOW, PassageBatch, passage_keys, passages_batch
from semhash_llm.text.tokenize import tokenize_batch

# ------------------------------------------------------------------ fixtures (own, deterministic)

_NOUNS = ("river city council report market farmer teacher engine bridge museum village storm harbor garden "
          "library company winter festival student doctor train airport forest painter mountain island factory "
          "election budget hospital kitchen orchestra newspaper satellite vaccine tournament bakery prison "
          "railway laboratory volcano desert glacier senator pilot novel camera bicycle harvest reservoir").split()
_ADJS = ("old quiet busy northern ancient modern small local rural famous broken heavy bright narrow coastal "
         "annual public private early late strange careful rapid sudden wooden frozen golden crowded").split()
_VERBS = ("visited repaired announced described closed opened reported crossed painted studied delayed "
          "approved rejected measured protected expanded flooded celebrated replaced inspected funded").split()
_ADVS = "quickly slowly finally again recently quietly openly nearly suddenly".split()
_PREPS = "near behind across under beside beyond through along during after before without".split()
_NAMES = "Maria Tomas Aiko Lars Fatima Olu Chen Priya Ivan Sofia Mateo Greta".split()
_TEMPLATES = (
    "The {a} {n} {v} the {a} {n} {p} the {n}.",
    "{N} {v} the {n} {p} the {a} {n} and then {v} the {n} {adv}.",
    "After the {a} {n}, the {n} {v} {adv} {p} the {a} {n} of the {n}.",
    "In {y}, {N} {v} a {a} {n} {p} the {n}, which the {n} had {v} {adv}.",
    "Nobody expected that the {n} would be {v} {p} the {a} {n} so {adv}.",
    "According to the {n}, the {a} {n} was {v} {p} a {a} {n} and a {n} in {y}.",
    "{N} and {N} {v} the {a} {n}, but the {n} {p} the {n} remained {a}.",
    "When the {n} {v} the {n}, {N} said the {a} {n} had never been {v} before.",
)
_FIELDS = {"a": _ADJS, "n": _NOUNS, "v": _VERBS, "p": _PREPS, "N": _NAMES, "adv": _ADVS}


def sentence(rng: random.Random) -> str:
    """A sentence of 10-20 words from one of eight templates (template siblings share many words)."""
    def fill(m: re.Match[str]) -> str:
        f = m.group(1)
        return str(rng.randrange(1890, 2024)) if f == "y" else rng.choice(_FIELDS[f])
    return re.sub(r"\{(\w+)\}", fill, rng.choice(_TEMPLATES))


def paragraph(rng: random.Random, n: int = 4) -> str:
    return " ".join(sentence(rng) for _ in range(n))


def typo(rng: random.Random, text: str) -> str:
    """One typo (substitution, deletion, insertion or transposition) inside a word of 4+ letters."""
    words = text.split(" ")
    i = rng.choice([k for k, w in enumerate(words) if sum(ch.isalpha() for ch in w) >= 4])
    w = words[i]
    k = rng.randrange(1, sum(ch.isalpha() for ch in w) - 1)
    op = rng.randrange(4)
    letters = "abcdefghijklmnopqrstuvwxyz"
    if op == 0:
        w = w[:k] + rng.choice([c for c in letters if c != w[k]]) + w[k + 1:]
    elif op == 1:
        w = w[:k] + w[k + 1:]
    elif op == 2:
        w = w[:k] + rng.choice(letters) + w[k:]
    else:
        w = w[: k - 1] + w[k] + w[k - 1] + w[k + 1:]
    words[i] = w
    return " ".join(words)


def change_word(rng: random.Random, text: str) -> str:
    words = text.split(" ")
    words[rng.randrange(len(words))] = rng.choice(_NOUNS + _ADJS)
    return " ".join(words)


_CJK = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 400))


def cjk_run(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_CJK) for _ in range(n))


def mixed_corpus() -> list[str]:
    rng = random.Random(7)
    return [
        paragraph(rng) + "\n\n" + paragraph(rng, 3) + "\n" + sentence(rng),
        "Short one. " + paragraph(rng, 2) + " Tail!\r\n\r\n" + paragraph(rng, 2),
        cjk_run(rng, 40) + "。" + cjk_run(rng, 25) + "！" + cjk_run(rng, 30) + "？",
        cjk_run(rng, 300),  # CJK without punctuation
        " ".join(rng.choice(_NOUNS) for _ in range(180)),  # English without any punctuation
        "\n".join(f"- {rng.choice(_ADJS)} {rng.choice(_NOUNS)} {rng.choice(_VERBS)}" for _ in range(40)),  # a list
        "Die Straße war ﬂach und ＦＵＬＬ. " + paragraph(rng, 2) + " Café e\u0301te\u0301 ½ ﬁn.",  # not NFKC, ß
        "ΟΔΟΣ ΚΑΙ ΣΟΦΙΑ είναι δύο λέξεις. " + paragraph(rng, 2).upper(),  # Greek sigma, upper case
        "\U0001F600 \U0001F389 " + paragraph(rng, 2) + " \U0001F44D\n\n***\n\n" + paragraph(rng, 1),
        "",
        "\U0001F600\U0001F389 \U0001F44D",
        "   \n\n \t ",
        "One short sentence.",
        "He said \"Stop!\" Then he left (quickly.) The value 3.14 is e.g. pi, i.e. about three. "
        + paragraph(rng, 2),
        "Line one has several words in it here\nline two has several words in it too\n" + cjk_run(rng, 20),
    ]


def remove_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without the union of ``spans``."""
    out = []
    at = 0
    for s, e in sorted(spans):
        if s > at:
            out.append(text[at:s])
        at = max(at, e)
    out.append(text[at:])
    return "".join(out)


def rows_of(batch: PassageBatch, d: int) -> range:
    off = batch.doc_offsets
    return range(int(off[d]), int(off[d + 1]))


# ------------------------------------------------------------------ offsets and cutting


def test_offsets_round_trip_every_passage_has_the_keys_of_its_original_slice() -> None:
    texts = mixed_corpus()
    batch = passages_batch(texts)
    assert len(batch) > 0
    slices = [texts[int(d)][int(s):int(e)] for d, s, e in zip(batch.doc, batch.start, batch.end)]
    ntok, hi, lo, near = passage_keys(slices)
    assert np.array_equal(ntok, batch.ntok)
    assert np.array_equal(hi, batch.exact_hi)
    assert np.array_equal(lo, batch.exact_lo)
    assert np.array_equal(near, batch.near)
    for sl, n in zip(slices, batch.ntok.tolist()):
        assert len(tokens(sl)) == n > 0
        assert sl == sl.strip()  # a passage starts and ends on text, never on whitespace
        assert not re.search(r"\n[ \t]*\n", sl)  # never across a paragraph break
    order = np.lexsort((batch.end, batch.start, batch.doc))
    assert np.array_equal(order, np.arange(len(batch)))


def test_every_token_is_in_a_passage_and_sentence_passages_tile_the_text() -> None:
    texts = mixed_corpus()
    batch = passages_batch(texts)
    for d, text in enumerate(texts):
        rows = rows_of(batch, d)
        spans = [(int(batch.start[r]), int(batch.end[r])) for r in rows]
        assert tokens(remove_spans(text, spans)) == []  # the gaps hold no token
        sentence_spans = [sp for r, sp in zip(rows, spans) if batch.kind[r] == KIND_SENTENCES]
        for (_, e0), (s1, _) in zip(sentence_spans, sentence_spans[1:]):
            assert e0 <= s1  # sentence passages never overlap
        if all(batch.kind[r] == KIND_SENTENCES for r in rows):
            # gaps + passages, in order, are exactly the text
            pieces, at = [], 0
            for s, e in spans:
                pieces += [text[at:s], text[s:e]]
                at = e
            pieces.append(text[at:])
            assert "".join(pieces) == text


def test_removing_the_spans_of_a_paragraph_leaves_exactly_the_rest() -> None:
    rng = random.Random(3)
    p1, p2, p3 = paragraph(rng, 3), paragraph(rng, 4), paragraph(rng, 2)
    text = p1 + "\n\n" + p2 + "\n\n" + p3
    batch = passages_batch([text])
    lo, hi = len(p1) + 2, len(p1) + 2 + len(p2)
    inside = [(int(s), int(e)) for s, e in zip(batch.start, batch.end) if lo <= s and e <= hi]
    assert len(inside) == 4  # every template sentence has 10 words or more: one passage each
    # what stays is the rest of the text and the spaces between the cut sentences
    assert remove_spans(text, inside) == p1 + "\n\n" + "   " + "\n\n" + p3


def test_cjk_and_unpunctuated_english_get_windows_that_cover_them() -> None:
    rng = random.Random(5)
    cjk = cjk_run(rng, 200)
    english = " ".join(rng.choice(_NOUNS) for _ in range(150))
    listing = "\n".join(f"{rng.choice(_ADJS)} {rng.choice(_NOUNS)}" for _ in range(60))
    batch = passages_batch([cjk, english, listing])
    for d, text in enumerate([cjk, english, listing]):
        rows = rows_of(batch, d)
        assert len(rows) >= 5
        assert all(batch.kind[r] == KIND_WINDOW for r in rows)
        assert all(batch.ntok[r] == 32 for r in rows)
        spans = [(int(batch.start[r]), int(batch.end[r])) for r in rows]
        assert tokens(remove_spans(text, spans)) == []
        gaps = np.diff([s for s, _ in spans])
        assert (gaps > 0).all()
    # windows of 32 tokens, one anchor per ~16 tokens: about 200 / 16 windows for the CJK text
    assert 8 <= len(rows_of(batch, 0)) <= 25


def test_windows_of_shared_content_align_wherever_it_sits() -> None:
    """Content-defined anchors: the same stretch inside two documents, at unrelated offsets, gets the same windows."""
    rng = random.Random(11)
    for make in (lambda n: cjk_run(rng, n), lambda n: " ".join(rng.choice(_NOUNS + _ADJS) for _ in range(n))):
        shared = make(400)
        sep = "" if not shared.isascii() else " "
        matched = []
        for shift in range(1, 8):
            parent = make(37 * shift) + sep + shared + sep + make(50)
            child = make(5 * shift + 3) + sep + shared
            batch = passages_batch([parent, child])
            pkeys = {(h, lw) for h, lw, d in zip(batch.exact_hi.tolist(), batch.exact_lo.tolist(), batch.doc.tolist())
                     if d == 0}
            cstart = len(child) - len(shared)
            inner = [r for r in rows_of(batch, 1) if batch.start[r] >= cstart + 40 and batch.end[r] < len(child) - 40]
            assert inner
            matched.append(np.mean([(int(batch.exact_hi[r]), int(batch.exact_lo[r])) in pkeys for r in inner]))
        assert min(matched) >= 0.95, matched


def test_sentence_rules() -> None:
    text = "He said \"Stop!\" Then he left (quickly.) The value 3.14 is e.g. pi.\nNext line\n\nNew paragraph 。第二句。"
    batch = passages_batch([text], min_words=1)
    got = [text[int(s):int(e)] for s, e in zip(batch.start, batch.end)]
    assert got == ["He said \"Stop!\"", "Then he left (quickly.)", "The value 3.14 is e.g.", "pi.", "Next line",
                   "New paragraph 。", "第二句。"]


def test_a_long_sentence_is_a_passage_of_its_own_and_short_runs_group_together() -> None:
    long1 = "The old river crossed the quiet city near the northern harbor today."
    long2 = "A modern engine was repaired behind the busy market after the storm."
    text = f"Yes. No. {long1} {long2} Fine. Done."
    batch = passages_batch([text])
    got = [text[int(s):int(e)] for s, e in zip(batch.start, batch.end)]
    assert got == ["Yes. No.", long1, long2, "Fine. Done."]
    # Issue 24.2: a long sentence keeps its key whatever short sentence its host puts beside it.
    keys = {(int(h), int(lo)) for t in (f"Dateline. {long1} Read more.", f"{long1} Share this.", long1)
            for h, lo, s, e in zip(*(lambda b: (b.exact_hi, b.exact_lo, b.start, b.end))(passages_batch([t])))
            if t[int(s):int(e)] == long1}
    assert len(keys) == 1
    # a paragraph shorter than min_words is one passage; paragraphs are never merged
    batch = passages_batch([f"Hi there.\n\n{long1}"])
    assert [int(n) for n in batch.ntok] == [2, 12]


def test_one_short_sentence_empty_and_emoji_only_texts() -> None:
    texts = ["One short sentence.", "", "\U0001F600\U0001F389 \U0001F44D", "   \n\n\t", "!!! ???", "x"]
    batch = passages_batch(texts)
    assert batch.num_docs == 6
    assert batch.doc.tolist() == [0, 5]  # texts without a token have no passage
    assert batch.ntok.tolist() == [3, 1]
    assert batch.doc_offsets.tolist() == [0, 1, 1, 1, 1, 1, 2]
    empty = passages_batch([])
    assert len(empty) == 0 and empty.near.shape == (0, 4) and empty.doc_offsets.tolist() == [0]


# ------------------------------------------------------------------ keys


def test_exact_key_ignores_comma_whitespace_case_and_width() -> None:
    base = "The old river, near the city, crossed the busy market in 1999."
    variants = [
        "The old river near the city crossed the busy market in 1999.",
        "the OLD river,   near the city,\tcrossed the busy market in 1999!",
        "THE OLD RIVER, NEAR THE CITY, CROSSED THE BUSY MARKET IN １９９９.",
        "  The old river, near the city; crossed the busy market in 1999 ...  ",
    ]
    batch = passages_batch([base] + variants)
    assert len(batch) == 5
    assert len(set(zip(batch.exact_hi.tolist(), batch.exact_lo.tolist()))) == 1
    other = passages_batch(["The old river, near the town, crossed the busy market in 1999."])
    assert (int(other.exact_hi[0]), int(other.exact_lo[0])) != (int(batch.exact_hi[0]), int(batch.exact_lo[0]))


def test_exact_key_is_blake2b_of_the_token_stream_or_a_keyed_blake2b() -> None:
    rng = random.Random(2)
    texts = [" ".join(sentence(rng) for _ in range(k)) for k in (1, 2, 3)] + ["ＡＢＣ Straße ﬁn " + cjk_run(rng, 30)]
    texts += [" ".join("w" * rng.randrange(1, 30) for _ in range(rng.randrange(1, 40))) for _ in range(60)]
    ntok, hi, lo, _ = passage_keys(texts)
    ncfg = NormalizeConfig()
    stage = tokenize_batch(normalize_batch(texts, ncfg), char_classes(True), ShingleConfig())
    assert np.array_equal(ntok, stage.num_tokens)
    for t, h, lw in zip(texts, hi.tolist(), lo.tolist()):
        stream = b"".join(tok.encode("utf-8") + b"\xff" for tok in tokens(t))
        want = hashlib.blake2b(stream, digest_size=16, person=b"semhash-tokens").digest()
        assert want == h.to_bytes(8, "big") + lw.to_bytes(8, "big")
    for key in (b"k", bytes(range(64))):
        _, khi, klo, _ = passage_keys(texts, key=key)
        for t, h, lw in zip(texts, khi.tolist(), klo.tolist()):
            stream = b"".join(tok.encode("utf-8") + b"\xff" for tok in tokens(t))
            want = hashlib.blake2b(stream, digest_size=16, key=key, person=b"semhash-passage").digest()
            assert want == h.to_bytes(8, "big") + lw.to_bytes(8, "big")


def test_near_keys_match_typo_variants_and_not_unrelated_sentences() -> None:
    rng = random.Random(1)
    sents = [sentence(rng) for _ in range(200)]
    typos = [typo(rng, s) for s in sents]
    changed = [change_word(rng, s) for s in sents]
    _, _, _, a = passage_keys(sents)
    _, _, _, b = passage_keys(typos)
    _, _, _, c = passage_keys(changed)
    assert a.shape == (200, 4)
    typo_rate = (a == b).any(axis=1).mean()
    word_rate = (a == c).any(axis=1).mean()
    shared = [(a[i + 1:] == a[i]).any(axis=1) for i in range(199)]
    unrelated_rate = np.concatenate(shared).mean()  # 19,900 pairs, template siblings included
    assert typo_rate >= 0.90, typo_rate
    assert word_rate >= 0.80, word_rate
    assert unrelated_rate <= 0.01, unrelated_rate
    # and through passages_batch: one typo per sentence of a paragraph
    para = " ".join(sents[:6])
    noisy = " ".join(typo(rng, s) for s in sents[:6])
    batch = passages_batch([para, noisy])
    assert batch.doc.tolist() == [0] * 6 + [1] * 6
    assert (batch.near[:6] == batch.near[6:]).any(axis=1).mean() >= 5 / 6


def test_cjk_near_keys_use_character_bigrams() -> None:
    rng = random.Random(4)
    sents = [cjk_run(rng, rng.randrange(15, 40)) + "。" for _ in range(200)]
    variants = []
    for s in sents:
        i = rng.randrange(len(s) - 1)
        variants.append(s[:i] + rng.choice(_CJK) + s[i + 1:])
    _, _, _, a = passage_keys(sents)
    _, _, _, b = passage_keys(variants)
    assert (a == b).any(axis=1).mean() >= 0.90
    assert np.concatenate([(a[i + 1:] == a[i]).any(axis=1) for i in range(199)]).mean() <= 0.01


def test_determinism_batch_vs_one_by_one_and_chunking(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = mixed_corpus()
    batch = passages_batch(texts)
    fields = ("start", "end", "kind", "ntok", "exact_hi", "exact_lo", "near")
    for d, text in enumerate(texts):
        one = passages_batch([text])
        rows = rows_of(batch, d)
        assert (one.doc == 0).all()
        for f in fields:
            assert np.array_equal(getattr(one, f), getattr(batch, f)[rows.start:rows.stop]), (d, f)
    monkeypatch.setattr(passages_mod, "_CHUNK_CPS", 64)  # many scratch chunks, documents larger than one
    again = passages_batch(texts)
    for f in ("doc",) + fields:
        assert np.array_equal(getattr(again, f), getattr(batch, f)), f


def test_normalization_options_and_keys_are_passed_through() -> None:
    text = "The Old River crossed the quiet city near the harbor, and the market closed."
    plain = passages_batch([text, text.lower()])
    assert plain.exact_hi[0] == plain.exact_hi[1]
    cased = passages_batch([text, text.lower()], normalize_config=NormalizeConfig(lowercase=False))
    assert cased.exact_hi[0] != cased.exact_hi[1]
    kept = passages_batch([text, text.replace(",", "")], normalize_config=NormalizeConfig(strip_punctuation=False))
    assert kept.exact_hi[0] != kept.exact_hi[1]
    keyed = passages_batch([text], key=b"secret")
    assert keyed.exact_hi[0] != plain.exact_hi[0]
    assert np.array_equal(keyed.near, plain.near[:1])
    assert normalize(text) == text.lower()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window": 2}, "The 'window' parameter of passages_batch must be an int >= 4. Got 2 instead."),
        ({"window": 32, "max_words": 16},
         "The 'max_words' parameter of passages_batch must be an int >= window (32). Got 16 instead."),
        ({"stride": 0}, "The 'stride' parameter of passages_batch must be an int in [1, window (32)]. Got 0 instead."),
        ({"stride": 33}, "The 'stride' parameter of passages_batch must be an int in [1, window (32)]. Got 33 instead."),
        ({"min_words": True}, "The 'min_words' parameter of passages_batch must be an int >= 1. Got True instead."),
        ({"near_bands": 0}, "The 'near_bands' parameter of passages_batch must be an int in [1, 16]. Got 0 instead."),
        ({"near_ngram": 9}, "The 'near_ngram' parameter of passages_batch must be an int in [1, 8]. Got 9 instead."),
        ({"key": "secret"}, "The 'key' parameter of passages_batch must be None or 1 to 64 bytes. Got 'secret' instead."),
        ({"normalize_config": {}},
         "The 'normalize_config' parameter of passages_batch must be a NormalizeConfig or None. Got {} instead."),
    ],
)
def test_parameters_are_validated(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        passages_batch(["some text here"], **kwargs)  # type: ignore[arg-type]
    assert str(err.value) == message
    assert isinstance(err.value, ValueError)


def test_passage_keys_validates_with_its_own_name() -> None:
    with pytest.raises(ConfigError, match="The 'near_rows' parameter of passage_keys must be an int in \\[1, 16\\]"):
        passage_keys(["text"], near_rows=0)
    ntok, hi, lo, near = passage_keys(["", "!!!"])
    assert ntok.tolist() == [0, 0] and (near == 0).all() and hi[0] == hi[1] and lo[0] == lo[1]
