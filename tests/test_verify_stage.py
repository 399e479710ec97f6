"""The verifier stage (``mgfn``): short pairs deferred by the linking stages, screened, decided by MGFN."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from helpers import QUESTION, RECORDS  # noqa: E402

from semhash_llm import PipelineConfig, deduplicate  # noqa: E402
from semhash_llm.verify.mgfn import load_mgfn, save_mgfn  # noqa: E402

pytestmark = pytest.mark.ml



def _run(model: Path, **verifier: object) -> tuple[dict[str, dict], dict]:
    # SPH radius = bits: every document's nearest codes are proposed, whatever their distance.
    cfg = PipelineConfig.from_dict({"verifier": {"model_path": str(model), **verifier}, "sph": {"radius": 64},
                                    "select": {"keep": "first"}})
    res = deduplicate(RECORDS, cfg)
    rows = {r["id"]: r for r in res.documents.to_pylist()}
    row = next(s for s in res.report["funnel"] if s["stage"] == "mgfn")
    return rows, row


def test_short_pairs_go_to_the_verifier_and_its_threshold_decides(tiny_model: Path) -> None:
    rows, row = _run(tiny_model, threshold=0.0)  # every verified pair accepted
    d = row["details"]
    assert d["pairs_verified"] >= 2 and d["pairs_accepted"] >= 2 and "deferral_buffer_growths" in d
    assert sum(d["pairs_deferred_by_stage"].values()) >= 2
    assert d["pairs_screened_out"] >= 1  # "far" shares no text with the questions: settled without the network
    assert rows["q2"]["action"] == rows["q3"]["action"] == "remove"
    assert {rows["q2"]["decided_by"], rows["q3"]["decided_by"]} == {"verifier"}
    assert rows["far"]["action"] == "keep" and rows["q1"]["action"] == "keep"
    assert 0 < d["share_of_all_pairs_verified"] <= 1 and d["verified_pairs_per_second"] > 0

    rows, row = _run(tiny_model, threshold=1.0)  # nothing reaches it: every short pair stays
    assert row["details"]["pairs_accepted"] == 0
    assert all(r["action"] == "keep" for r in rows.values())


def test_without_the_verifier_the_hash_score_decides(tiny_model: Path) -> None:
    cfg = PipelineConfig.from_dict({"verifier": {"enabled": False}, "select": {"keep": "first"}})
    res = deduplicate(RECORDS, cfg)
    rows = {r["id"]: r for r in res.documents.to_pylist()}
    assert "mgfn" not in [s["stage"] for s in res.report["funnel"]]
    assert rows["q2"]["decided_by"] in ("lsh", "sph")  # merged on lexical overlap alone


def test_long_pairs_are_settled_by_their_hash_score(tiny_model: Path) -> None:
    _rows, row = _run(tiny_model, threshold=0.0, short_tokens=1)  # nothing is short
    assert row["details"]["pairs_verified"] == 0 and row["pairs_in"] == 0


def test_verified_decisions_are_deterministic(tiny_model: Path) -> None:
    a = _run(tiny_model, threshold=0.5)
    b = _run(tiny_model, threshold=0.5)
    assert a[0] == b[0]
    assert a[1]["details"]["pairs_accepted"] == b[1]["details"]["pairs_accepted"]


def test_saved_model_round_trips_and_missing_weights_are_explained(tiny_model: Path, tmp_path: Path) -> None:
    model, extra = load_mgfn(tiny_model)
    assert extra == {"screen": 0.3} and not model.training
    with pytest.raises(FileNotFoundError, match="semhash-llm train verifier"):
        load_mgfn(tmp_path / "missing.pt")
    assert np.isfinite(sum(float(p.detach().sum()) for p in model.parameters()))


def test_the_threshold_stored_with_the_weights_is_the_default(tiny_model: Path, tmp_path: Path) -> None:
    model, _ = load_mgfn(tiny_model)
    permissive = tmp_path / "permissive.safetensors"
    save_mgfn(model, permissive, extra={"screen": 0.3, "threshold": 0.0})  # as `train verifier` stores it
    _rows, row = _run(permissive)
    assert row["details"]["threshold"] == 0.0 and row["details"]["pairs_accepted"] == row["details"]["pairs_verified"]
    _rows, row = _run(permissive, threshold=1.0)  # the config's threshold wins
    assert row["details"]["threshold"] == 1.0 and row["details"]["pairs_accepted"] == 0


def test_the_cover_check_asks_the_verifier_about_uncovered_removals(tiny_model: Path) -> None:
    """A removal no accepted pair covers is read by the verifier (once per pair): accepted when
    the model says so, refused when the texts fail the trigram screen."""
    from semhash_llm.config import VerifierConfig
    from semhash_llm.pipeline.cover import CoverCheck
    from semhash_llm.stages.base import Edges
    from semhash_llm.stages.mgfn import VerifierStage

    texts = [QUESTION, QUESTION.replace("interview", "intervew"), RECORDS[3]["text"], QUESTION + " Thanks."]
    calls: list[int] = []

    def read_texts(docs: np.ndarray) -> list[str]:
        calls.append(len(docs))
        return [texts[int(d)] for d in docs]

    no_edges = Edges(np.array([3]), np.array([0]), np.array([0.9], np.float32), np.array([6], np.uint8))
    for threshold, expected in ((0.0, [True, False, True]), (1.0, [False, False, True])):
        stage = VerifierStage(VerifierConfig(model_path=str(tiny_model), threshold=threshold))
        covers = CoverCheck({"mgfn": stage}, no_edges, 4, PipelineConfig(), read_texts,
                            np.array([len(t) for t in texts]))
        evidence = covers.evidence
        # 1 vs 0: a typo copy (verifier decides); 2 vs 0: nothing shared (screened out); 3 vs 0: an accepted pair.
        assert covers(np.array([1, 2, 3]), np.array([0, 0, 0])).tolist() == expected
        # what covered each pair labels a removal the check left without a path of edges
        assert evidence[3 * 4 + 0] == (6, pytest.approx(0.9))
        assert 2 * 4 + 0 not in evidence
        if expected[0]:
            kind, prob = evidence[1 * 4 + 0]
            assert kind == 6 and threshold <= prob <= 1.0
        asked = len(calls)
        covers(np.array([1, 2]), np.array([0, 0]))
        assert len(calls) == asked  # each pair is read once
        assert stage.cover_pairs_ == 2


def test_a_verdict_does_not_depend_on_the_batch_it_sits_in() -> None:
    """Issue 24.8: MC-dropout masks are seeded per pair from its texts, so a pair's mean and
    variance are the same alone, among other pairs, at any position, in any batch size — and the
    same whether decide or the cover check asks (either order of the pair)."""
    from semhash_llm.config import VerifierConfig
    from semhash_llm.stages.mgfn import VerifierStage

    texts = [QUESTION, QUESTION.replace("interview", "intervew"), "How do I cook rice in a pot?",
             "How do I cook rice in a pan?", RECORDS[3]["text"], QUESTION + " Thanks."]
    alone = VerifierStage(VerifierConfig(batch_size=1))
    m1, v1 = alone._predict(texts, np.array([0]), np.array([1]))
    crowd = VerifierStage(VerifierConfig(batch_size=4))
    ia, ib = np.array([2, 4, 0, 5, 3]), np.array([3, 5, 1, 0, 2])
    m2, v2 = crowd._predict(texts, ia, ib)
    assert m2[2] == pytest.approx(m1[0], abs=1e-6) and v2[2] == pytest.approx(v1[0], abs=1e-6)
    # the cover check and decide ask in either order: one verdict
    read = lambda d: [texts[int(i)] for i in d]  # noqa: E731
    _, p_ab = crowd.verify_pairs_scored(np.array([0, 2]), np.array([1, 3]), read)
    _, p_ba = crowd.verify_pairs_scored(np.array([3, 1]), np.array([2, 0]), read)
    assert p_ab.tolist() == pytest.approx(p_ba[::-1].tolist(), abs=1e-6)
    # and it is not the same mask for every pair (seeds differ per pair)
    from semhash_llm.verify.mgfn import dropout_masks

    masks = dropout_masks(np.array([1, 2], dtype=np.uint64), 4, (128,), 0.1)[0]
    assert masks.shape == (4, 2, 128) and not bool((masks[:, 0] == masks[:, 1]).all())
    assert abs(float(masks.mean()) - 0.9) < 0.05


NOISY_BASE = ("The harbour committee will meet on Thursday evening to consider the new ferry timetable "
              "and the proposal to close the northern pier during the winter storms.")
NOISY_COPY = ("The harbovr committee wil meet on Thrusday evening to consdier the new ferry timetab1e "
              "and the proposa1 to close the nortbern pier durinq the winter storrns.")


def test_a_short_noisy_copy_is_proposed_by_the_character_net(tiny_model: Path) -> None:
    # Every fifth word or so carries a slip: no word 5-gram survives, so no word band can propose the pair.
    records = [{"id": "base", "text": NOISY_BASE}, {"id": "copy", "text": NOISY_COPY},
               {"id": "other", "text": "A completely different sentence about the price of apples in autumn markets."}]

    def run(**minhash: object) -> tuple[dict, dict]:
        cfg = PipelineConfig.from_dict({"verifier": {"model_path": str(tiny_model), "threshold": 0.0},
                                        "minhash": minhash, "sph": {"enabled": False}, "aw": {"enabled": False},
                                        "passages": {"enabled": False}, "select": {"keep": "first"}})
        res = deduplicate(records, cfg)
        lsh = next(s for s in res.report["funnel"] if s["stage"] == "lsh")["details"]
        return {r["id"]: r for r in res.documents.to_pylist()}, lsh

    rows, lsh = run(short_max_chars=0)
    assert rows["copy"]["action"] == "keep" and lsh["short_char_net"] == {"docs": 0}
    rows, lsh = run()
    net = lsh["short_char_net"]
    assert net["docs"] == 3 and net["pairs_deferred"] >= 1
    assert rows["copy"]["action"] == "remove" and rows["copy"]["decided_by"] == "verifier"
    assert rows["other"]["action"] == "keep"
