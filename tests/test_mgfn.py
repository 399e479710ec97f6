"""MGFN: shapes, gating, Monte Carlo dropout, and a few training steps beat chance on generated pairs."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from semhash_llm.train.pairs import NEGATIVE_FAMILIES, POSITIVE_TYPES, make_pairs  # noqa: E402
from semhash_llm.train.verifier import IMITATES  # noqa: E402
from semhash_llm.verify.features import NUM_PAIR_FEATURES, pair_features  # noqa: E402
from semhash_llm.verify.mgfn import CATEGORIES, MGFN, MGFNConfig, document_traits, encode_texts, load_mgfn  # noqa: E402

pytestmark = pytest.mark.ml

TINY = MGFNConfig(max_chars=256, char_dim=8, char_channels=8, kernel_sizes=(3, 5), max_tokens=64,
                  token_buckets=1024, token_dim=16, lstm_hidden=16, semantic_dim=12, hidden=32, projection=16)


def test_shapes_and_gate_on_tiny_inputs() -> None:
    torch.manual_seed(0)
    model = MGFN(TINY).eval()
    texts = ["a short text", "Home\nNews\nSport\na longer article line with many words in it.", "今天天气很好", ""]
    batch = encode_texts(texts, TINY, semantic=np.ones((4, 12), np.float32))
    longest = max(len(t.encode()) for t in texts)
    assert batch.chars.shape == (4, longest) and batch.tokens.shape[1] <= 64 and batch.traits.shape == (4, 3)
    levels, gate = model.levels(batch)
    assert levels.shape == (4, 3, 32) and gate.shape == (4, 3)
    assert torch.allclose(gate.sum(1), torch.ones(4)) and (gate > 0).all()
    u = model.encode(batch)
    assert u.shape == (4, 16) and torch.allclose(u.norm(dim=1), torch.ones(4), atol=1e-5)
    p = model(batch, batch)
    assert p.shape == (4,) and ((p > 0) & (p < 1)).all()
    traits = document_traits(texts)
    assert traits[2, 1] == pytest.approx(1.0) and traits[0, 1] == 0.0  # share of CJK characters
    assert traits[1, 2] > 0.2  # menu lines: tokens on short lines
    # The gate follows the traits: different traits, different weights.
    model.gate.weight.data.fill_(0.0)
    model.gate.weight.data[0, 1] = 5.0  # CJK share -> character level
    _, gate = model.levels(batch)
    assert gate[2, 0] > 0.9 and gate[0, 0] < 0.5
    with pytest.raises(ValueError, match="semantic embeddings"):
        encode_texts(texts, TINY, semantic=np.ones((3, 12), np.float32))


def test_mc_dropout_variance_is_zero_without_dropout_and_positive_with_it() -> None:
    torch.manual_seed(0)
    texts = ["the council approved a new budget", "the council approved the budget"]
    a, b = encode_texts(texts[:1] * 3, TINY), encode_texts(texts[1:] * 3, TINY)
    off = MGFN(MGFNConfig(**{**TINY.__dict__, "dropout": 0.0})).eval()
    _, var = off.mc_predict(a, b, passes=8)
    assert torch.all(var == 0)
    on = MGFN(MGFNConfig(**{**TINY.__dict__, "dropout": 0.3})).eval()
    mean, var = on.mc_predict(a, b, passes=8)
    assert torch.all(var > 0) and mean.shape == (3,)
    assert not on.training  # its mode is restored


def _docs(seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    vocab = [a + b for a in ("bal", "cor", "dun", "fel", "gar", "hol", "kin", "lor", "mar", "nes")
             for b in ("ton", "mere", "wick", "ford", "ley", "by", "ham", "stead")]
    names = ["Paris", "Berlin", "Madrid", "Lisbon", "Vienna", "Prague"]
    return [" ".join(" ".join([rng.choice(names)] + [rng.choice(vocab) for _ in range(12)]) + " is here."
                     for _ in range(25)) for _ in range(16)]


def test_padding_never_changes_a_document_vector() -> None:
    """Byte max-pooling is masked and the BiLSTM reads packed sequences: a text encodes the same
    alone and beside a much longer one (batches are as wide as their longest text)."""
    torch.manual_seed(0)
    model = MGFN(TINY).eval()
    short, long = "a short text here", "a much longer text with many more words " * 6
    sem = np.ones((1, 12), np.float32)
    with torch.no_grad():
        alone = model.fuse(encode_texts([short], TINY, semantic=sem))
        beside = model.fuse(encode_texts([short, long], TINY, semantic=np.ones((2, 12), np.float32)))[:1]
    assert torch.allclose(alone, beside, atol=1e-5)


def test_a_few_training_steps_beat_chance_on_generated_pairs() -> None:
    torch.manual_seed(0)
    pairs = make_pairs(_docs(), per_kind=40, seed=0)
    train, test = pairs[:300], pairs[300:]
    cat = {k: i for i, k in enumerate(CATEGORIES)}
    config = replace(TINY, pair_features=NUM_PAIR_FEATURES)

    def tensors(ps):
        a = encode_texts([p.a for p in ps], config)
        b = encode_texts([p.b for p in ps], config)
        f = torch.from_numpy(pair_features([p.a for p in ps], [p.b for p in ps]))
        y = torch.tensor([float(p.label) for p in ps])
        c = torch.tensor([cat.get(p.kind, cat.get(IMITATES.get(p.kind, "B"), 1)) for p in ps])
        return a, b, f, y, c

    a, b, f, y, c = tensors(train)
    ta, tb, tf, ty, _ = tensors(test)
    model = MGFN(config)
    model.eval()
    with torch.no_grad():
        untrained = ((model(ta, tb, tf) > 0.5).float() == ty).float().mean().item()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        model.train()
        u, v = model.encode(a), model.encode(b)
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(model.logits(u, v, f), y)
                + 0.5 * model.contrastive_loss(u, v, y, c))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        acc = ((model(ta, tb, tf) > 0.5).float() == ty).float().mean().item()
    # Chance is 0.5 (balanced positives and negatives; 100 test pairs: one standard error 0.05).
    assert acc >= 0.65 and acc > untrained + 0.1, (acc, untrained)
    assert (model.margins() > 0).all()
    assert {p.kind for p in pairs} >= set(POSITIVE_TYPES)


@pytest.mark.slow
def test_train_verifier_writes_weights_report_and_card(tmp_path) -> None:
    import json

    from semhash_llm.train.verifier import train_verifier

    report = train_verifier(_docs(1) + _docs(2), tmp_path, per_kind=6, epochs=1, trained_on="synthetic test text")
    model, extra = load_mgfn(tmp_path / "verifier.safetensors")
    assert isinstance(model, MGFN) and 0.0 <= extra["threshold"] <= 1.0
    scores = json.loads((tmp_path / "train_report.json").read_text())["scores"]
    assert scores == report["scores"] and 0.0 <= scores["accuracy"] <= 1.0
    assert set(scores["per_kind_accuracy"]) <= set(POSITIVE_TYPES) | set(NEGATIVE_FAMILIES)
    assert "synthetic test text" in (tmp_path / "MODEL_CARD.md").read_text()


@pytest.mark.slow
def test_a_frozen_encoder_keeps_its_weights_and_the_boundary_learns(tmp_path) -> None:
    import torch

    from semhash_llm.train.verifier import train_verifier

    first, second = tmp_path / "first", tmp_path / "second"
    train_verifier(_docs(1) + _docs(2), first, per_kind=6, epochs=1, trained_on="synthetic test text")
    with pytest.raises(ValueError, match="init"):
        train_verifier(_docs(1), second, per_kind=6, freeze_encoder=True)
    report = train_verifier(_docs(1) + _docs(2), second, per_kind=6, epochs=2, c_share=2, seed=3,
                            init=first / "verifier.safetensors", freeze_encoder=True)
    a, _ = load_mgfn(first / "verifier.safetensors")
    b, _ = load_mgfn(second / "verifier.safetensors")
    sa, sb = a.state_dict(), b.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa if k.startswith(("char_", "convs.", "token_", "lstm.", "semantic.", "gate.")))
    assert not torch.equal(sa["boundary.0.weight"], sb["boundary.0.weight"])
    assert report["config"]["freeze_encoder"] and report["config"]["c_share"] == 2
