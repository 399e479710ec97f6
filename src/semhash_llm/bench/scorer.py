"""Score a decisions table against the benchmark's ground truth, exactly as BENCHMARK.md §2 defines.

* S_A, S_B, S_C — deletion recall: a group of n copies needs n−1 removals; the share of those made
  (removals beyond n−1 count as a false deletion of the group's representative).
* S_D — containment accuracy: the share of (child, parent) pairs with the child removed and the parent kept.
* S_E — fragment removal rate: of the redundant occurrences of each fragment (all but one), the share whose
  span is removed (≥ 80 % overlap, as intersection over union, with a reported span; touching or overlapping
  reported spans are merged first) while the host is kept.
* FDR — removed must-keep documents / must-keep documents. Must-keep: background documents, D parents,
  E hosts, hard negatives, one representative per A/B/C group and one per semantic pair (both members of a
  paraphrase pair removed counts once). Also reported per hard-negative family.
* composite = 100 × (0.25·S_A + 0.15·S_B + 0.20·S_C + 0.20·S_D + 0.20·S_E), and 0 when FDR > 10 %.
* type C recall by character error band (given :func:`label_pairs` of the texts): for each noisy copy
  of a C group, its character error rate against the group's original (Levenshtein distance / the original's length) and
  whether the two end in one cluster (joined by ``duplicate_of`` or a shared ``cluster_id``); bands
  < 2 %, 2–5 %, 5–10 %, ≥ 10 %.
* hard negatives by meaning edit (given the same labels): each negative pair is classified by what
  changed between its two texts (:func:`semhash_llm.verify.features.differences`): the same words
  reordered, a negation, a number, a capitalised name, only function words, other words, or only
  noise and punctuation; the false deletion rate of its documents per kind.
* semantic P/R over the PAWS documents: a predicted pair is (removed, duplicate_of) or two documents with the
  same cluster_id, both PAWS documents; precision = predicted pairs that are paraphrase pairs / predicted
  pairs, recall = paraphrase pairs predicted / paraphrase pairs.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from semhash_llm.bench.truth import GroundTruth
from semhash_llm.sketch.unionfind import UnionFind

logger = logging.getLogger(__name__)

__all__ = [
    "CONTRACT_COLUMNS",
    "WEIGHTS",
    "FDR_LIMIT",
    "FRAGMENT_OVERLAP",
    "ERROR_BANDS",
    "EDIT_KINDS",
    "DecisionsError",
    "Decisions",
    "ScoreResult",
    "load_decisions",
    "score",
    "error_band",
    "edit_kind",
    "PairLabels",
    "label_pairs",
    "c_recall_by_error_band",
    "negatives_by_edit_kind",
    "oracle_decisions",
    "keep_all_decisions",
    "remove_all_decisions",
    "decisions_table",
]

CONTRACT_COLUMNS = ("id", "action", "duplicate_of", "relation", "cluster_id", "score", "decided_by", "fragments")
WEIGHTS = {"A": 0.25, "B": 0.15, "C": 0.20, "D": 0.20, "E": 0.20}
FDR_LIMIT = 0.10
FRAGMENT_OVERLAP = 0.80
#: (label, lower bound inclusive, upper bound exclusive) of a pair's character error rate.
ERROR_BANDS: tuple[tuple[str, float, float], ...] = (
    ("< 2%", 0.0, 0.02), ("2–5%", 0.02, 0.05), ("5–10%", 0.05, 0.10), ("≥ 10%", 0.10, float("inf")),
)
#: The kinds of meaning edit a hard-negative pair is classified into, in the order they are tested.
EDIT_KINDS = ("reorder", "negation", "number", "name", "function words", "other words", "noise only")


class DecisionsError(ValueError):
    """A decisions table breaks the output contract (BENCHMARK.md §1)."""


@dataclass(frozen=True)
class Decisions:
    """The parts of a decisions table the scorer reads, checked against the corpus ids."""

    removed: frozenset[str]
    duplicate_of: dict[str, str]
    cluster_of: dict[str, str]
    fragments: dict[str, list[tuple[int, int]]]


@dataclass
class ScoreResult:
    """One system's scores on the benchmark."""

    s_a: float
    s_b: float
    s_c: float
    s_d: float
    s_e: float
    composite: float
    fdr: float
    fdr_by_family: dict[str, float]
    semantic_precision: float | None
    semantic_recall: float
    removed: int
    false_deletions: int
    must_keep: int
    details: dict[str, int] = field(default_factory=dict)
    c_by_error_band: dict[str, list[int]] = field(default_factory=dict)
    """Band label → [noisy copies, found in one cluster with their original] (labels given only)."""
    negatives_by_edit_kind: dict[str, list[int]] = field(default_factory=dict)
    """Edit kind → [negative documents, removed] over the two-document negative sets (labels given only)."""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def decisions_table(
    ids: list[str],
    removed: dict[str, str | None],
    relation: dict[str, str] | None = None,
    cluster_of: dict[str, str] | None = None,
    score: dict[str, float] | None = None,
    decided_by: dict[str, str] | None = None,
    fragments: dict[str, list[tuple[int, int]]] | None = None,
) -> pa.Table:
    """Build a contract-shaped decisions table (BENCHMARK.md §1) from plain mappings."""
    relation, cluster_of, score = relation or {}, cluster_of or {}, score or {}
    decided_by, fragments = decided_by or {}, fragments or {}
    return pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "action": pa.array(["remove" if i in removed else "keep" for i in ids], pa.string()),
            "duplicate_of": pa.array([removed.get(i) for i in ids], pa.string()),
            "relation": pa.array([relation.get(i) for i in ids], pa.string()),
            "cluster_id": pa.array([cluster_of.get(i) for i in ids], pa.string()),
            "score": pa.array([score.get(i) for i in ids], pa.float64()),
            "decided_by": pa.array([decided_by.get(i) for i in ids], pa.string()),
            "fragments": pa.array([[list(s) for s in fragments.get(i, [])] for i in ids], pa.list_(pa.list_(pa.int64()))),
        }
    )


def load_decisions(decisions: pa.Table | Path | str, truth: GroundTruth) -> Decisions:
    """Check a decisions table (or a ``documents.parquet`` path) against the contract and the corpus ids."""
    origin = "decisions table"
    if isinstance(decisions, (str, Path)):
        origin = str(decisions)
        try:
            decisions = pq.read_table(decisions)
        except (OSError, pa.ArrowInvalid) as exc:
            raise DecisionsError(f"{origin}: cannot read parquet: {exc}") from exc
    missing = [c for c in CONTRACT_COLUMNS if c not in decisions.column_names]
    if missing:
        raise DecisionsError(f"{origin}: missing contract columns {missing}; has {decisions.column_names}")
    cols = {c: decisions.column(c).to_pylist() for c in ("id", "action", "duplicate_of", "cluster_id", "fragments")}
    removed: set[str] = set()
    dup_of: dict[str, str] = {}
    cluster_of: dict[str, str] = {}
    frags: dict[str, list[tuple[int, int]]] = {}
    seen: set[str] = set()
    docs = truth.documents
    for row, doc_id in enumerate(cols["id"]):
        if not isinstance(doc_id, str):
            raise DecisionsError(f"{origin}: row {row}: field 'id' must be a string, got {doc_id!r}")
        if doc_id in seen:
            raise DecisionsError(f"{origin}: row {row}: id {doc_id!r} appears twice (one row per document)")
        if doc_id not in docs:
            raise DecisionsError(f"{origin}: row {row}: id {doc_id!r} is not a document of the corpus")
        seen.add(doc_id)
        action = cols["action"][row]
        if action == "remove":
            removed.add(doc_id)
            target = cols["duplicate_of"][row]
            if target is not None:
                if target not in docs:
                    raise DecisionsError(f"{origin}: row {row}: duplicate_of {target!r} is not a document of the corpus")
                dup_of[doc_id] = target
        elif action != "keep":
            raise DecisionsError(f"{origin}: row {row}: field 'action' must be 'keep' or 'remove', got {action!r}")
        cl = cols["cluster_id"][row]
        if cl is not None:
            cluster_of[doc_id] = str(cl)
        spans = cols["fragments"][row] or []
        if spans:
            out: list[tuple[int, int]] = []
            length = docs[doc_id].length
            for span in spans:
                if span is None or len(span) != 2 or not 0 <= span[0] <= span[1] <= length:
                    raise DecisionsError(
                        f"{origin}: row {row} (id {doc_id!r}): field 'fragments' needs [start, end] with "
                        f"0 ≤ start ≤ end ≤ {length}, got {span!r}"
                    )
                out.append((int(span[0]), int(span[1])))
            frags[doc_id] = out
    if len(seen) != len(docs):
        absent = sorted(set(docs) - seen)
        raise DecisionsError(f"{origin}: {len(absent)} corpus documents have no row, e.g. {absent[:5]}")
    for doc_id, target in dup_of.items():
        if target in removed:
            logger.debug("%s: %s is a duplicate of %s, which is itself removed", origin, doc_id, target)
    return Decisions(frozenset(removed), dup_of, cluster_of, frags)


def _best_overlap(spans: list[tuple[int, int]], start: int, end: int) -> float:
    """Best intersection-over-union of [start, end) with one reported span (touching spans merged first).

    IoU rather than plain coverage, so cutting a whole host document does not count as removing the
    passage inside it.
    """
    merged: list[list[int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    best = 0.0
    for s, e in merged:
        inter = min(e, end) - max(s, start)
        if inter > 0:
            best = max(best, inter / (max(e, end) - min(s, start)))
    return best


def _clusters(dec: Decisions, truth: GroundTruth) -> Callable[[str], int]:
    """The cluster of a document: union of ``duplicate_of`` links and shared ``cluster_id`` values."""
    index = {d: i for i, d in enumerate(truth.documents)}
    cluster_node = {cl: len(index) + k for k, cl in enumerate(sorted(set(dec.cluster_of.values())))}
    uf = UnionFind(len(index) + len(cluster_node))
    for a, b in dec.duplicate_of.items():
        uf.union(index[a], index[b])
    for d, cl in dec.cluster_of.items():
        uf.union(index[d], cluster_node[cl])
    return lambda doc: uf.find(index[doc])


def error_band(rate: float) -> str:
    """The label of :data:`ERROR_BANDS` that holds a character error rate."""
    return next(label for label, lo, hi in ERROR_BANDS if lo <= rate < hi)


def edit_kind(a: str, b: str) -> str:
    """What changed between the two texts of a hard-negative pair (one of :data:`EDIT_KINDS`)."""
    from semhash_llm.verify.features import differences, words

    wa, wb = [w.lower() for w in words(a)], [w.lower() for w in words(b)]
    if wa != wb and Counter(wa) == Counter(wb):
        return "reorder"
    d = differences(a, b)
    if d.negation:
        return "negation"
    if d.number:
        return "number"
    if d.name:
        return "name"
    changed = d.substituted + d.inserted
    if changed == 0:
        return "noise only"
    return "function words" if d.function * 2 >= changed else "other words"


@dataclass(frozen=True)
class PairLabels:
    """What the texts say of the truth's pairs — each C copy's error band, each two-document negative's
    edit kind. It depends on the corpus only, so a run computes it once for all the systems it scores."""

    copy_bands: tuple[tuple[str, str, str], ...]
    """(original, noisy copy, :func:`error_band` of the copy's character error rate) per C copy."""
    negative_kinds: tuple[tuple[str, str, str], ...]
    """(one text, the other, :func:`edit_kind`) per two-document hard-negative set."""


def label_pairs(truth: GroundTruth, texts: Mapping[str, str]) -> PairLabels:
    """The :class:`PairLabels` of ``truth``'s pairs from the texts (document id → text)."""
    from semhash_llm.sketch.edit import char_error_rate

    bands = tuple(
        (g.members[0], m, error_band(char_error_rate(texts[g.members[0]], texts[m])))
        for g in truth.groups if g.category == "C" for m in g.members[1:]
    )
    kinds = tuple((n.members[0], n.members[1], edit_kind(texts[n.members[0]], texts[n.members[1]]))
                  for n in truth.negatives if len(n.members) == 2)
    return PairLabels(bands, kinds)


def c_recall_by_error_band(dec: Decisions, truth: GroundTruth, labels: PairLabels) -> dict[str, list[int]]:
    """Band label → [noisy copies of type C, found in one cluster with their group's original]."""
    cluster = _clusters(dec, truth)
    out = {label: [0, 0] for label, _, _ in ERROR_BANDS}
    for base, copy, band in labels.copy_bands:
        out[band][0] += 1
        out[band][1] += int(cluster(base) == cluster(copy))
    return out


def negatives_by_edit_kind(dec: Decisions, labels: PairLabels) -> dict[str, list[int]]:
    """Edit kind → [documents of two-document hard-negative sets, removed]."""
    out = {kind: [0, 0] for kind in EDIT_KINDS}
    for a, b, kind in labels.negative_kinds:
        out[kind][0] += 2
        out[kind][1] += int(a in dec.removed) + int(b in dec.removed)
    return out


def score(decisions: pa.Table | Path | str | Decisions, truth: GroundTruth,
          labels: PairLabels | None = None) -> ScoreResult:
    """Score one system's decisions on the benchmark (see the module docstring for the definitions);
    with ``labels`` (:func:`label_pairs`) also type C recall by error band and the negatives by edit kind."""
    dec = decisions if isinstance(decisions, Decisions) else load_decisions(decisions, truth)
    removed = dec.removed
    details: dict[str, int] = {}

    # A, B, C: deletion recall; removing all n counts one false deletion (the representative).
    group_rep_false = 0
    group_rep_total = 0
    s: dict[str, float] = {}
    for cat in "ABC":
        need = made = 0
        for g in (g for g in truth.groups if g.category == cat):
            n_removed = sum(1 for m in g.members if m in removed)
            need += len(g.members) - 1
            made += min(n_removed, len(g.members) - 1)
            group_rep_total += 1
            group_rep_false += int(n_removed == len(g.members))
        s[cat] = made / need if need else 0.0
        details[f"{cat}_removals_needed"], details[f"{cat}_removals_made"] = need, made

    # D: containment accuracy.
    ok = sum(1 for c in truth.containments if c.child in removed and c.parent not in removed)
    s["D"] = ok / len(truth.containments) if truth.containments else 0.0
    details["D_pairs"], details["D_correct"] = len(truth.containments), ok

    # E: fragment removal rate over the redundant occurrences.
    need = made = 0
    for f in truth.fragments:
        need += len(f.occurrences) - 1
        hits = sum(
            1
            for o in f.occurrences
            if o.doc_id not in removed
            and _best_overlap(dec.fragments.get(o.doc_id, []), o.start, o.end) >= FRAGMENT_OVERLAP
        )
        made += min(hits, len(f.occurrences) - 1)
    s["E"] = made / need if need else 0.0
    details["E_occurrences_redundant"], details["E_occurrences_removed"] = need, made

    # FDR over the must-keep documents.
    must_keep = [d for d, info in truth.documents.items() if info.role in ("background", "d_parent", "e_host", "negative")]
    false_docs = sum(1 for d in must_keep if d in removed)
    sem_false = sum(1 for a, b in truth.semantic_pairs if a in removed and b in removed)
    total_keep = len(must_keep) + group_rep_total + len(truth.semantic_pairs)
    false_deletions = false_docs + group_rep_false + sem_false
    fdr = false_deletions / total_keep if total_keep else 0.0
    fam_total: dict[str, int] = defaultdict(int)
    fam_removed: dict[str, int] = defaultdict(int)
    for n in truth.negatives:
        for m in n.members:
            fam_total[n.family] += 1
            fam_removed[n.family] += int(m in removed)
    fdr_by_family = {f: fam_removed[f] / fam_total[f] for f in sorted(fam_total)}
    for role in ("background", "d_parent", "e_host"):
        ids = [d for d, info in truth.documents.items() if info.role == role]
        if ids:
            fdr_by_family[f"role:{role}"] = sum(1 for d in ids if d in removed) / len(ids)
    if group_rep_total:
        fdr_by_family["role:group_representative"] = group_rep_false / group_rep_total

    # Semantic duplicates: pair precision / recall over the PAWS documents.
    paws_docs = {d for d, info in truth.documents.items() if info.source == "paws_dev"}
    predicted: set[frozenset[str]] = set()
    for a, b in dec.duplicate_of.items():
        if a in paws_docs and b in paws_docs and a != b:
            predicted.add(frozenset((a, b)))
    by_cluster: dict[str, list[str]] = defaultdict(list)
    for d, cl in dec.cluster_of.items():
        if d in paws_docs:
            by_cluster[cl].append(d)
    for members in by_cluster.values():
        if len(members) > 50:  # a giant cluster: count its pairs without listing them all
            logger.debug("semantic scoring: cluster with %d PAWS documents", len(members))
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                predicted.add(frozenset((a, b)))
    positives = {frozenset(p) for p in truth.semantic_pairs}
    tp = len(predicted & positives)
    precision = tp / len(predicted) if predicted else None
    recall = tp / len(positives) if positives else 0.0
    details["semantic_predicted_pairs"], details["semantic_true_pairs_found"] = len(predicted), tp

    composite = 100.0 * sum(WEIGHTS[c] * s[c] for c in "ABCDE")
    if fdr > FDR_LIMIT:
        composite = 0.0
    bands = c_recall_by_error_band(dec, truth, labels) if labels is not None else {}
    kinds = negatives_by_edit_kind(dec, labels) if labels is not None else {}
    return ScoreResult(
        s_a=s["A"], s_b=s["B"], s_c=s["C"], s_d=s["D"], s_e=s["E"],
        composite=composite, fdr=fdr, fdr_by_family=fdr_by_family,
        semantic_precision=precision, semantic_recall=recall,
        removed=len(removed), false_deletions=false_deletions, must_keep=total_keep, details=details,
        c_by_error_band=bands, negatives_by_edit_kind=kinds,
    )


# ---- reference decision tables used by the self-test ---------------------------------------------------

def oracle_decisions(truth: GroundTruth) -> pa.Table:
    """The decisions the ground truth asks for: first member of each group kept, the rest removed; D children
    removed; every fragment occurrence but the first cut from its (kept) host; paraphrase pairs merged."""
    ids = list(truth.documents)
    removed: dict[str, str | None] = {}
    relation: dict[str, str] = {}
    cluster: dict[str, str] = {}
    frags: dict[str, list[tuple[int, int]]] = {}
    rel = {"A": "near_duplicate", "B": "near_duplicate", "C": "near_duplicate"}
    for g in truth.groups:
        keep = g.members[0]
        cluster[keep] = g.group_id
        for m in g.members[1:]:
            removed[m], relation[m], cluster[m] = keep, rel[g.category], g.group_id
    for c in truth.containments:
        removed[c.child], relation[c.child] = c.parent, "contained_in"
        cluster[c.child] = cluster[c.parent] = f"D:{c.parent}"
    for f in truth.fragments:
        for o in f.occurrences[1:]:
            frags.setdefault(o.doc_id, []).append((o.start, o.end))
    for a, b in truth.semantic_pairs:
        removed[b], relation[b] = a, "semantic"
        cluster[a] = cluster[b] = f"S:{a}"
    return decisions_table(ids, removed, relation, cluster, {d: 1.0 for d in removed}, {d: "oracle" for d in removed}, frags)


def keep_all_decisions(truth: GroundTruth) -> pa.Table:
    """Keep every document."""
    return decisions_table(list(truth.documents), {})


def remove_all_decisions(truth: GroundTruth) -> pa.Table:
    """Remove every document (each named a duplicate of the first)."""
    ids = list(truth.documents)
    return decisions_table(ids, {d: ids[0] for d in ids[1:]} | {ids[0]: None})
