"""``OUT/report.html``: one self-contained page (inline SVG and CSS, no script, no network).

The stage funnel, counts per relation and stage, the cluster-size histogram, the score
distribution of every stage with its decision threshold, a sample of clusters side by side
with their differences highlighted, the viral fragments with the documents they were cut
from, and the judge's decisions. Texts are re-read from the input files (:class:`RunView`).
"""

from __future__ import annotations

import difflib
import html
import logging
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from semhash_llm.io.atomic import write_text_atomic
from semhash_llm.runview import RunView, RunViewError

__all__ = ["render_report_html", "write_report_html"]

logger = logging.getLogger(__name__)

_PALETTE = {"bloom": "#4e79a7", "lsh": "#f28e2b", "aw": "#e15759", "sph": "#76b7b2", "verifier": "#59a14f",
            "mgfn": "#59a14f", "judge": "#edc948", "passages": "#b07aa1", "reader": "#9c755f", "select": "#bab0ac",
            "read": "#bab0ac", "write": "#bab0ac"}
_MAX_CHARS = 3000


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _color(name: str) -> str:
    return _PALETTE.get(name, "#8c8c8c")


def _hbars(items: list[tuple[str, float, str]], title: str, unit: str = "", width: int = 640) -> str:
    """Horizontal bars: (label, value, colour)."""
    if not items:
        return ""
    bar_h, gap, left, right = 22, 6, 150, 90
    height = len(items) * (bar_h + gap) + 34
    top = max(v for _, v, _ in items) or 1.0
    inner = width - left - right
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             f'aria-label="{_e(title)}"><text x="0" y="16" class="t">{_e(title)}</text>']
    for i, (label, value, color) in enumerate(items):
        y = 28 + i * (bar_h + gap)
        w = max(inner * value / top, 1 if value else 0)
        parts.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{_e(label)}</text>'
                     f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}" rx="3"/>'
                     f'<text x="{left + w + 6:.1f}" y="{y + 15}">{value:,.{0 if float(value).is_integer() else 2}f}'
                     f'{_e(unit)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _histogram(counts: list[int], labels: list[str], title: str, color: str, width: int = 640, height: int = 220,
               marker: tuple[float, str] | None = None, log: bool = False) -> str:
    """Vertical bars over ``labels``; ``marker`` (position in bar units, label) draws a threshold line."""
    left, bottom, top_pad = 48, 40, 42
    inner_w, inner_h = width - left - 12, height - bottom - top_pad
    n = max(len(counts), 1)
    peak = max(counts) if counts else 0

    def scale(c: int) -> float:
        if peak <= 0:
            return 0.0
        return (math.log10(c + 1) / math.log10(peak + 1)) if log else c / peak

    bw = inner_w / n
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             f'aria-label="{_e(title)}"><text x="0" y="16" class="t">{_e(title)}</text>',
             f'<line x1="{left}" y1="{top_pad + inner_h}" x2="{left + inner_w}" y2="{top_pad + inner_h}" '
             'stroke="#999"/>',
             f'<text x="{left - 6}" y="{top_pad + 8}" text-anchor="end" class="s">{peak:,}</text>']
    step = max(1, n // 10)
    for i, c in enumerate(counts):
        h = inner_h * scale(c)
        x = left + i * bw
        parts.append(f'<rect x="{x + 1:.1f}" y="{top_pad + inner_h - h:.1f}" width="{max(bw - 2, 1):.1f}" '
                     f'height="{h:.1f}" fill="{color}"><title>{_e(labels[i])}: {c:,}</title></rect>')
        if i % step == 0:
            parts.append(f'<text x="{x + bw / 2:.1f}" y="{top_pad + inner_h + 14}" text-anchor="middle" '
                         f'class="s">{_e(labels[i])}</text>')
    if marker is not None:
        mx = left + marker[0] * bw
        parts.append(f'<line x1="{mx:.1f}" y1="{top_pad - 4}" x2="{mx:.1f}" y2="{top_pad + inner_h}" '
                     'stroke="#d62728" stroke-width="2" stroke-dasharray="5 3"/>'
                     f'<text x="{mx:.1f}" y="{top_pad - 8}" text-anchor="middle" class="s" fill="#d62728">{_e(marker[1])}</text>')
    if log:
        parts.append(f'<text x="{left}" y="{height - 6}" class="s">log scale</text>')
    parts.append("</svg>")
    return "".join(parts)


def _words(text: str) -> list[tuple[str, str]]:
    """``(word, the whitespace after it)`` pairs; leading whitespace rides on an empty word."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"(\S*)(\s*)", text) if m.group(0)]


def _diff_pair(kept: str, removed: str) -> tuple[str, str]:
    """Both texts as HTML, the words only one of them has highlighted (compared word by word:
    whitespace and line breaks are kept as written and never count as a difference)."""
    a, b = _words(kept[:_MAX_CHARS]), _words(removed[:_MAX_CHARS])
    sm = difflib.SequenceMatcher(a=[w for w, _ in a], b=[w for w, _ in b], autojunk=False)

    def render(pieces: list[tuple[str, str]], tag: str | None) -> str:
        if tag is None:
            return "".join(_e(w) + _e(sp) for w, sp in pieces)
        return "".join((f"<{tag}>{_e(w)}</{tag}>" if w else "") + _e(sp) for w, sp in pieces)

    left: list[str] = []
    right: list[str] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        same = op == "equal"
        left.append(render(a[i1:i2], None if same else "del"))
        right.append(render(b[j1:j2], None if same else "ins"))
    more_a = "<i> … (cut at 3,000 characters)</i>" if len(kept) > _MAX_CHARS else ""
    more_b = "<i> … (cut at 3,000 characters)</i>" if len(removed) > _MAX_CHARS else ""
    return "".join(left) + more_a, "".join(right) + more_b


def _thresholds(view: RunView) -> dict[str, tuple[float, str]]:
    cfg = view.config
    out = {"lsh": (cfg.minhash.threshold, "MinHash Jaccard"), "aw": (cfg.aw.threshold, "weighted Jaccard"),
           "sph": (cfg.sph.min_jaccard, "MinHash Jaccard floor"), "passages": (cfg.passages.containment, "containment")}
    funnel = {row["stage"]: row for row in view.report.get("funnel", [])}
    thr = funnel.get("mgfn", {}).get("details", {}).get("threshold")
    if thr is None:
        thr = cfg.verifier.threshold
    if thr is not None:
        out["verifier"] = (float(thr), "MGFN probability")
    out["judge"] = (0.5, "fused probability")
    return out


def _section(title: str, body: str, anchor: str) -> str:
    return f'<section id="{anchor}"><h2>{_e(title)}</h2>{body}</section>'


def _funnel(view: RunView) -> str:
    rows = view.report.get("funnel", [])
    stages = [r for r in rows if r["stage"] not in ("read", "select", "write")]
    bars = [(r["stage"], float(r.get("docs_removed", r.get("docs_in", 0) - r.get("docs_out", 0))), _color(r["stage"]))
            for r in stages]
    time_bars = [(r["stage"], float(r.get("seconds", 0.0)), _color(r["stage"])) for r in rows]
    table = ['<table><tr><th>stage</th><th>docs in</th><th>docs out</th><th>removed</th><th>pairs in</th>'
             '<th>pairs out</th><th>seconds</th><th>peak MiB</th></tr>']
    for r in rows:
        removed = r.get("docs_removed", (r.get("docs_in") or 0) - (r.get("docs_out") or 0))
        table.append(f'<tr><td><span class="dot" style="background:{_color(r["stage"])}"></span>{_e(r["stage"])}</td>'
                     f'<td>{r.get("docs_in", 0):,}</td><td>{r.get("docs_out", 0):,}</td><td>{removed:,}</td>'
                     f'<td>{r.get("pairs_in", 0):,}</td><td>{r.get("pairs_out", 0):,}</td>'
                     f'<td>{r.get("seconds", 0):,.2f}</td><td>{r.get("peak_rss_mb", 0):,.0f}</td></tr>')
    table.append("</table>")
    return ('<div class="row">' + _hbars(bars, "documents removed by each stage") +
            _hbars(time_bars, "seconds per step", " s") + "</div>" + "".join(table))


def _relations(view: RunView) -> str:
    rel = view.column("relation")
    by = view.column("decided_by")
    pairs = Counter((r, d) for r, d in zip(rel, by) if r is not None)
    kinds = {"exact": "exact", "near_duplicate": "near duplicate", "contained_in": "contained", "skipped": "skipped"}
    semantic = sum(c for (r, d), c in pairs.items() if r == "near_duplicate" and d in ("sph", "verifier", "judge"))
    counts: Counter[str] = Counter()
    for (r, _d), c in pairs.items():
        counts[kinds.get(r, r)] += c
    fragments = sum(len(f or []) for f in view.column("fragments"))
    items = [(k, float(counts.get(k, 0)), c) for k, c in (("exact", "#4e79a7"), ("near duplicate", "#f28e2b"),
                                                            ("contained", "#b07aa1"), ("skipped", "#9c755f"))]
    items.insert(2, ("of which semantic", float(semantic), "#76b7b2"))
    items.append(("fragment spans cut", float(fragments), "#e15759"))
    stages = sorted({d for _, d in pairs})
    relations = sorted({r for r, _ in pairs})
    table = ["<table><tr><th>relation \\ decided by</th>" + "".join(f"<th>{_e(s)}</th>" for s in stages) + "</tr>"]
    for r in relations:
        table.append(f"<tr><td>{_e(r)}</td>" + "".join(f"<td>{pairs.get((r, s), 0):,}</td>" for s in stages) + "</tr>")
    table.append("</table>")
    return _hbars(items, "removed documents by relation (semantic: found by sph, the verifier or the judge)") + \
        "".join(table)


def _cluster_sizes(view: RunView) -> str:
    sizes = np.array([len(rows) for rows in view.clusters().values()], dtype=np.int64)
    if sizes.size == 0:
        return "<p>No cluster of two or more documents.</p>"
    edges = [2, 3, 4, 5, 10, 20, 50, 100, 1000, 10_000, 100_000, 10**9]
    labels = ["2", "3", "4", "5–9", "10–19", "20–49", "50–99", "100–999", "1k–9k", "10k–99k", "100k+"]
    counts = [int(np.count_nonzero((sizes >= lo) & (sizes < hi))) for lo, hi in zip(edges[:-1], edges[1:])]
    while len(counts) > 4 and counts[-1] == 0:
        counts.pop()
        labels.pop()
    return (_histogram(counts, labels, f"clusters by size ({sizes.size:,} clusters; largest {int(sizes.max()):,})",
                       "#4e79a7", log=True) +
            f"<p>{int(sizes.sum()):,} documents are in clusters; {int(sizes.sum()) - sizes.size:,} of them were "
            "removed.</p>")


def _scores(view: RunView) -> str:
    score = view.column("score")
    by = view.column("decided_by")
    thresholds = _thresholds(view)
    parts: list[str] = []
    for stage in ("lsh", "aw", "sph", "verifier", "judge", "passages"):
        values = np.array([s for s, d in zip(score, by) if d == stage and s is not None and not math.isnan(s)])
        if values.size == 0:
            continue
        bins = 20
        lo = 0.0
        counts = np.histogram(values, bins=bins, range=(lo, 1.0))[0].tolist()
        labels = [f"{lo + i / bins:.2f}" for i in range(bins)]
        thr = thresholds.get(stage)
        marker = (thr[0] * bins, f"threshold {thr[0]:.2f}") if thr is not None else None
        what = thr[1] if thr is not None else "score"
        parts.append(_histogram(counts, labels, f"{stage}: {what} ({values.size:,} removed, median "
                                                f"{float(np.median(values)):.3f})", _color(stage),
                                width=440, height=200, marker=marker))
    if not parts:
        return "<p>No scored removal (exact copies score 1.0 and are not shown).</p>"
    return ('<p>The score of a removed document is its weakest accepted link on the path to the kept one; the '
            'dashed line is the stage\'s decision threshold.</p><div class="grid">' + "".join(parts) + "</div>")


def _sample_clusters(view: RunView, per_stage: int = 2) -> str:
    if not view.has_texts:
        return "<p>This run wrote no locations.parquet: texts cannot be shown.</p>"
    score = view.column("score")
    by = view.column("decided_by")
    dup = view.column("duplicate_of")
    rel = view.column("relation")
    ids = view.column("id")
    picks: list[int] = []
    for stage in ("bloom", "lsh", "aw", "sph", "verifier", "judge", "passages"):
        rows = [i for i, d in enumerate(by) if d == stage and dup[i] is not None]
        # the borderline removals (lowest score) say most about a stage; then the typical one
        rows.sort(key=lambda i: (score[i] if score[i] is not None and not math.isnan(score[i]) else 1.0, i))
        chosen = rows[:1] + ([rows[len(rows) // 2]] if len(rows) > 2 else [])
        picks.extend(chosen[:per_stage])
    if not picks:
        return "<p>Nothing was removed.</p>"
    keepers = [view.row(str(dup[i])) for i in picks]
    texts = view.texts(sorted(set(picks) | set(keepers)))
    text_of = dict(zip(sorted(set(picks) | set(keepers)), texts))
    out = []
    for i, k in zip(picks, keepers):
        left, right = _diff_pair(text_of[k], text_of[i])
        s = score[i]
        s_txt = f"{s:.3f}" if s is not None and not math.isnan(s) else "-"
        out.append(f'<div class="pair"><div class="ph"><span class="dot" style="background:{_color(by[i])}"></span>'
                   f'<b>{_e(by[i])}</b> · {_e(rel[i])} · score {s_txt} · cluster of {_e(ids[k])}</div>'
                   f'<div class="cols"><div><h4>kept: {_e(ids[k])} ({len(text_of[k]):,} chars)</h4>'
                   f'<div class="txt">{left}</div></div><div><h4>removed: {_e(ids[i])} ({len(text_of[i]):,} chars)'
                   f'</h4><div class="txt">{right}</div></div></div></div>')
    return ('<p>For each stage, its removal with the lowest score and a typical one. '
            '<del>Struck</del> words are only in the kept document, <ins>marked</ins> words only in the removed one. '
            'See any pair in full with <code>semhash-llm explain A B --run OUT</code>.</p>' + "".join(out))


def _fragments(view: RunView, limit: int = 8) -> str:
    frags = view.column("fragments")
    rows = [i for i, f in enumerate(frags) if f]
    if not rows:
        return "<p>No viral fragment was cut.</p>"
    if not view.has_texts:
        return f"<p>{len(rows):,} documents had fragments cut; texts cannot be shown (no locations.parquet).</p>"
    ids = view.column("id")
    hosts: dict[str, list[int]] = {}
    texts = {}
    for start in range(0, len(rows), 2048):
        chunk = rows[start:start + 2048]
        texts.update(dict(zip(chunk, view.texts(chunk))))
    for r in rows:
        for a, b in frags[r]:
            key = " ".join(texts[r][a:b].split())
            hosts.setdefault(key, []).append(r)
    ranked = sorted(hosts.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:limit]
    out = [f"<p>{len(rows):,} kept documents had {sum(len(f) for f in frags if f):,} spans cut: "
           f"{len(hosts):,} distinct fragments. The most widespread:</p>"]
    for frag, where in ranked:
        r = where[0]
        a, b = next((a, b) for a, b in frags[r] if " ".join(texts[r][a:b].split()) == frag)
        lo, hi = max(0, a - 300), min(len(texts[r]), b + 300)
        context = (_e(texts[r][lo:a]) + f"<mark>{_e(texts[r][a:b])}</mark>" + _e(texts[r][b:hi]))
        names = ", ".join(_e(ids[w]) for w in where[:12]) + (f" and {len(where) - 12:,} more" if len(where) > 12 else "")
        out.append(f'<div class="pair"><div class="ph">cut from {len(where):,} document(s): {names}</div>'
                   f'<div class="txt">{"… " if lo else ""}{context}{" …" if hi < len(texts[r]) else ""}</div></div>')
    return "".join(out)


def _judge(view: RunView, limit: int = 40) -> str:
    path = view.root / "judge_pairs.parquet"
    if not path.is_file():
        return "<p>The judge did not run (it is off by default: <code>--judge local|openai</code>).</p>"
    t = pq.read_table(path).to_pylist()
    if not t:
        return "<p>The judge ran; the verifier referred no pair to it.</p>"
    outcomes = Counter(str(r.get("outcome")) for r in t)
    flips_dup = sum(1 for r in t if r.get("linked") and not r.get("automatic"))
    flips_dis = sum(1 for r in t if not r.get("linked") and r.get("automatic"))
    spoke = sum(1 for r in t if r.get("instructions_removed"))
    head = (f"<p>{len(t):,} uncertain pairs referred by the verifier: "
            + ", ".join(f"{k} {v:,}" for k, v in outcomes.most_common())
            + f". The judge turned {flips_dup:,} of the verifier's 'distinct' into duplicates and {flips_dis:,} "
              "'duplicate' into distinct. "
            + (f"In {spoke:,} pair{'s' if spoke != 1 else ''} a document spoke to the model ('ignore the "
               "criteria', 'answer yes'): those sentences were taken out before the judge read the pair. "
               if spoke else "")
            + "The rationale of each verdict is its numbers: the verifier's "
              "probability and variance (why it was uncertain), the judge's calibrated probability and the "
              "fused one (weighted by confidence).</p>")
    t.sort(key=lambda r: (r.get("linked") == r.get("automatic"), -abs((r.get("final_p") or 0.5) - 0.5)))
    rows = ["<table><tr><th>A</th><th>B</th><th>verifier p ± var</th><th>judge p</th><th>fused</th><th>linked</th>"
            "<th>verifier alone</th><th>outcome</th></tr>"]

    def f(v: Any) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

    for r in t[:limit]:
        flip = ' class="flip"' if r.get("linked") != r.get("automatic") else ""
        rows.append(f"<tr{flip}><td>{_e(r.get('id_a'))}</td><td>{_e(r.get('id_b'))}</td>"
                    f"<td>{f(r.get('verifier_p'))} ± {f(r.get('verifier_var'))}</td><td>{f(r.get('judge_p'))}</td>"
                    f"<td>{f(r.get('final_p'))}</td><td>{'yes' if r.get('linked') else 'no'}</td>"
                    f"<td>{'dup' if r.get('automatic') else 'distinct'}</td><td>{_e(r.get('outcome'))}"
                    f"{' (instructions removed)' if r.get('instructions_removed') else ''}</td></tr>")
    rows.append("</table>")
    return head + "".join(rows)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2937;color:#fff;padding:18px 28px}header h1{margin:0 0 4px;font-size:22px}
header p{margin:2px 0;color:#d1d5db}nav{padding:8px 28px;background:#eef1f5}nav a{margin-right:14px;color:#1f4e99}
main{padding:8px 28px 40px;max-width:1400px}section{background:#fff;border:1px solid #e5e7eb;border-radius:8px;
padding:12px 18px;margin:16px 0}h2{font-size:18px;margin:4px 0 10px}
.kpis{display:flex;gap:14px;flex-wrap:wrap}.kpi{background:#fff;border:1px solid #e5e7eb;border-radius:8px;
padding:10px 16px;min-width:120px}.kpi b{display:block;font-size:22px}.kpi span{color:#6b7280}
table{border-collapse:collapse;margin:8px 0}td,th{border-bottom:1px solid #eee;padding:4px 10px;text-align:right}
td:first-child,th:first-child{text-align:left}tr.flip{background:#fff7e0}
svg.chart text{font:12px system-ui,sans-serif;fill:#333}svg.chart text.t{font-weight:600;font-size:13px}
svg.chart text.s{font-size:10px;fill:#555}.row,.grid{display:flex;flex-wrap:wrap;gap:18px}
.dot{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:6px}
.pair{border:1px solid #e5e7eb;border-radius:6px;margin:10px 0}.ph{background:#f3f4f6;padding:6px 10px}
.cols{display:grid;grid-template-columns:1fr 1fr}.cols>div{padding:6px 10px;min-width:0}
.cols>div+div{border-left:1px solid #e5e7eb}h4{margin:4px 0;font-size:13px;color:#374151}
.txt{white-space:pre-wrap;word-break:break-word;font:12.5px/1.5 ui-monospace,Menlo,Consolas,monospace;
max-height:340px;overflow:auto;padding:6px 10px}del{background:#fde2e1;color:#8a1c1c;text-decoration:line-through}
ins{background:#d9f5dd;color:#14532d;text-decoration:none}mark{background:#ffe58a}code{background:#f3f4f6;padding:0 4px}
"""


def render_report_html(view: RunView) -> str:
    """The report of the run ``view`` as one HTML document."""
    rep = view.report
    s = rep.get("summary", {})
    kpis = [("documents", s.get("documents", view.num_rows)), ("kept", s.get("kept", 0)),
            ("removed", s.get("removed", 0)), ("clusters", s.get("clusters", 0)),
            ("skipped", s.get("skipped", 0)), ("fragment spans cut", s.get("fragment_spans_cut", 0))]
    kpi_html = "".join(f'<div class="kpi"><b>{v:,}</b><span>{_e(k)}</span></div>' for k, v in kpis)
    dps = rep.get("documents_per_second")
    sub = (f"{rep.get('seconds', 0):,.1f} s, {dps:,.0f} documents/s, peak {rep.get('peak_rss_mb', 0):,.0f} MiB · "
           if dps else "")
    resumed = rep.get("resumed_stages") or []
    sections = [("Funnel", _funnel, "funnel"), ("Relations", _relations, "relations"),
                ("Cluster sizes", _cluster_sizes, "clusters"), ("Scores and thresholds", _scores, "scores"),
                ("Sample clusters, side by side", _sample_clusters, "samples"),
                ("Viral fragments and their hosts", _fragments, "fragments"), ("Judge decisions", _judge, "judge")]
    body = []
    for title, fn, anchor in sections:
        try:
            body.append(_section(title, fn(view), anchor))
        except RunViewError as exc:  # texts unavailable: the section says why, the rest stands
            body.append(_section(title, f"<p>Not shown: {_e(exc)}</p>", anchor))
    nav = "".join(f'<a href="#{a}">{_e(t.split(",")[0])}</a>' for t, _, a in sections)
    inputs = ", ".join(_e(f.get("name", "")) for f in rep.get("files", [])[:8])
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>SemHash-LLM report: {_e(view.root.name)}</title><style>{_CSS}</style></head><body>"
            f"<header><h1>SemHash-LLM deduplication report</h1><p>{_e(view.root)} · inputs: {inputs}</p>"
            f"<p>{sub}config {_e(rep.get('config_fingerprint', ''))} · semhash-llm {_e(rep.get('semhash_llm_version', ''))}"
            + (f" · resumed: {_e(', '.join(resumed))}" if resumed else "") + "</p></header>"
            f"<nav>{nav}</nav><main><div class=\"kpis\">{kpi_html}</div>{''.join(body)}</main></body></html>")


def write_report_html(view: RunView, path: str | Path | None = None) -> Path:
    """Render and write the report (atomically); default ``OUT/report.html``."""
    target = Path(path) if path is not None else view.root / "report.html"
    write_text_atomic(target, render_report_html(view))
    return target
