"""``semhash-llm inspect OUT``: a run's clusters and neighbours, in the terminal.

- the largest clusters (size, kept document, how its members were linked);
- ``--cluster ID``: every document of one cluster, kept one first, with relation, stage, score
  and the opening of its text;
- ``--similar ID``: the documents most like one document — lexical neighbours by MinHash
  Jaccard estimate and, when SPH ran, semantic neighbours by Hamming distance of SPH codes —
  computed over every document of the run (the texts are re-read once: seconds per 100k
  documents for MinHash, the SPH student's speed for the codes).
"""

from __future__ import annotations

import heapq
import shutil
from collections import Counter
from typing import Any

import numpy as np

from semhash_llm.runview import RunView

__all__ = ["largest_clusters", "cluster_members", "similar_documents", "format_clusters", "format_members",
           "format_similar"]


def snippet(text: str, width: int) -> str:
    """The opening of ``text`` on one line, at most ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"


def largest_clusters(view: RunView, top: int = 10) -> list[dict[str, Any]]:
    """The ``top`` largest clusters: id, size, the relations and stages of their removed members."""
    clusters = view.clusters()
    relation = view.column("relation")
    decided = view.column("decided_by")
    order = sorted(clusters.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))[:top]
    out: list[dict[str, Any]] = []
    texts = view.texts([rows[0] for _, rows in order]) if view.has_texts and order else [None] * len(order)
    for (cid, rows), text in zip(order, texts):
        removed = rows[1:]
        out.append({"cluster_id": cid, "size": len(rows), "kept_row": rows[0],
                    "relations": dict(Counter(relation[r] for r in removed).most_common()),
                    "decided_by": dict(Counter(decided[r] for r in removed).most_common()), "text": text})
    return out


def cluster_members(view: RunView, cluster_id: str, limit: int = 50) -> list[dict[str, Any]]:
    """The documents of one cluster (kept first; at most ``limit``), with their texts' openings."""
    clusters = view.clusters()
    rows = clusters.get(str(cluster_id))
    if rows is None:
        row = view.row(str(cluster_id))  # an id that is not a cluster: say which cluster it is in, if any
        cid = view.documents.column("cluster_id")[row].as_py()
        if cid is None:
            return [{**view.record(row), "text": view.texts([row])[0] if view.has_texts else None}]
        rows = clusters[str(cid)]
    rows = rows[:limit]
    texts = view.texts(rows) if view.has_texts else [None] * len(rows)
    return [{**view.record(r), "text": t} for r, t in zip(rows, texts)]


def similar_documents(view: RunView, doc_id: str, top: int = 10) -> dict[str, list[dict[str, Any]]]:
    """The ``top`` documents most like ``doc_id``: ``lexical`` (MinHash Jaccard estimate, the lsh
    stage's signatures) and ``semantic`` (Hamming distance of SPH codes, when SPH ran)."""
    from semhash_llm.stages.lsh import MinHashLSHStage

    cfg = view.config
    target = view.row(doc_id)
    query_text = view.texts([target])[0]
    lsh = MinHashLSHStage(cfg.minhash)
    qsig = lsh.compute([query_text], cfg.normalize, cfg.shingle)["signatures"][0]
    sph = None
    if cfg.sph.enabled:
        from semhash_llm.stages.sph import SPHStage

        sph = SPHStage(cfg.sph)
        qcode = sph.compute([query_text], cfg.normalize, cfg.shingle)["codes"][0:1]
        qbits = np.unpackbits(np.ascontiguousarray(qcode).view(np.uint8))
    lex: list[tuple[float, int]] = []
    sem: list[tuple[int, int]] = []
    for rows, texts in view.iter_texts():
        keep = rows != target
        rows = rows[keep]
        texts = [t for t, k in zip(texts, keep.tolist()) if k]
        if not texts:
            continue
        sigs = lsh.compute(texts, cfg.normalize, cfg.shingle)["signatures"]
        jac = (sigs == qsig).mean(axis=1)
        for j in np.argsort(-jac, kind="stable")[:top].tolist():
            item = (float(jac[j]), -int(rows[j]))
            if len(lex) < top:
                heapq.heappush(lex, item)
            else:
                heapq.heappushpop(lex, item)
        if sph is not None:
            codes = sph.compute(texts, cfg.normalize, cfg.shingle)["codes"]
            bits = np.unpackbits(np.ascontiguousarray(codes).view(np.uint8).reshape(len(texts), -1), axis=1)
            dist = (bits != qbits).sum(axis=1)
            for j in np.argsort(dist, kind="stable")[:top].tolist():
                sitem = (-int(dist[j]), -int(rows[j]))
                if len(sem) < top:
                    heapq.heappush(sem, sitem)
                else:
                    heapq.heappushpop(sem, sitem)

    def rows_of(found: list[tuple[Any, int]], key: str, sign: int) -> list[dict[str, Any]]:
        ordered = sorted(found, reverse=True)
        rows = [-r for _, r in ordered]
        texts = view.texts(rows) if rows else []
        return [{**view.record(r), key: sign * s if sign < 0 else s, "text": t}
                for (s, _), r, t in zip(ordered, rows, texts)]

    return {"query": [{**view.record(target), "text": query_text}],
            "lexical": rows_of(lex, "jaccard", 1), "semantic": rows_of(sem, "hamming", -1) if sph is not None else []}


def _width() -> int:
    return max(60, shutil.get_terminal_size((120, 24)).columns)


def format_clusters(view: RunView, found: list[dict[str, Any]]) -> str:
    s = view.report.get("summary", {})
    head = (f"{view.root}: {s.get('documents', view.num_rows):,} documents, {s.get('removed', 0):,} removed, "
            f"{s.get('clusters', 0):,} clusters of two or more")
    if not found:
        return head + "\nno cluster: every document was kept on its own"
    w = _width()
    lines = [head, f"{'size':>6}  {'cluster (kept id)':<24} {'linked by':<28} text"]
    for c in found:
        by = ", ".join(f"{k} {v}" for k, v in c["decided_by"].items())
        text = snippet(c["text"], w - 62) if c["text"] is not None else ""
        lines.append(f"{c['size']:>6}  {snippet(c['cluster_id'], 24):<24} {snippet(by, 28):<28} {text}")
    lines.append("see one cluster: semhash-llm inspect OUT --cluster ID")
    return "\n".join(lines)


def format_members(members: list[dict[str, Any]]) -> str:
    w = _width()
    lines = [f"{'action':<7} {'id':<20} {'relation':<15} {'by':<9} {'score':>6}  text"]
    for m in members:
        score = f"{m['score']:.3f}" if isinstance(m.get("score"), float) else "-"
        text = snippet(m["text"], w - 64) if m.get("text") is not None else ""
        lines.append(f"{m['action']:<7} {snippet(str(m['id']), 20):<20} {m.get('relation') or '-':<15} "
                     f"{m.get('decided_by') or '-':<9} {score:>6}  {text}")
    return "\n".join(lines)


def format_similar(found: dict[str, list[dict[str, Any]]]) -> str:
    w = _width()
    q = found["query"][0]
    lines = [f"most similar to {q['id']!r}: {snippet(q['text'], w - 30)}"]
    for key, label, fmt in (("lexical", "MinHash Jaccard", "{:.3f}"), ("semantic", "SPH Hamming", "{:d}")):
        if not found[key]:
            continue
        lines.append(f"-- {key} neighbours ({label})")
        score_key = "jaccard" if key == "lexical" else "hamming"
        for m in found[key]:
            same = "same cluster" if m.get("cluster_id") and m.get("cluster_id") == q.get("cluster_id") else m["action"]
            lines.append(f"{fmt.format(m[score_key]):>7}  {snippet(str(m['id']), 20):<20} {same:<12} "
                         f"{snippet(m['text'], w - 45)}")
    return "\n".join(lines)
