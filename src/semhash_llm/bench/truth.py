"""Ground truth of the development benchmark: what was planted where, and what must be kept.

The truth is a JSON file beside the corpus (``truth.json``). It records every duplicate group (A, B, C),
every parent/child containment pair (D), every planted fragment with its character span in each host (E),
every hard-negative family and the semantic-duplicate pairs scored apart. Spans are Python string
offsets ``[start, end)`` into the document's ``text`` field exactly as written in the corpus.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from semhash_llm.io.readers import InputError, iter_json_objects

logger = logging.getLogger(__name__)

__all__ = [
    "TRUTH_FORMAT",
    "Role",
    "DocInfo",
    "Group",
    "Containment",
    "Occurrence",
    "Fragment",
    "NegativeSet",
    "GroundTruth",
    "TruthError",
    "read_corpus",
    "duplicate_pair_test",
    "write_corpus",
]

TRUTH_FORMAT = "semhash-llm-bench-truth/1"

Role = Literal["background", "group_member", "d_child", "d_parent", "e_host", "negative", "semantic"]
_ROLES = {"background", "group_member", "d_child", "d_parent", "e_host", "negative", "semantic"}


class TruthError(ValueError):
    """The ground truth is malformed or inconsistent with the corpus."""


@dataclass(frozen=True)
class DocInfo:
    """What one document is in the benchmark."""

    role: Role
    source: str
    length: int


@dataclass(frozen=True)
class Group:
    """n copies of one content (types A, B, C); n−1 of them should be removed."""

    group_id: str
    category: Literal["A", "B", "C"]
    members: tuple[str, ...]


@dataclass(frozen=True)
class Containment:
    """Type D: ``child`` is contained in ``parent``; the child should go, the parent stay.

    ``span`` is where the child's text sits in the parent for contiguous excerpts; ``None`` for quoted
    replies (the child is quoted line by line with ``> `` prefixes).
    """

    child: str
    parent: str
    kind: Literal["excerpt", "quoted_reply"]
    span: tuple[int, int] | None


@dataclass(frozen=True)
class Occurrence:
    doc_id: str
    start: int
    end: int


@dataclass(frozen=True)
class Fragment:
    """Type E: one passage planted into several otherwise unique host documents."""

    fragment_id: str
    text: str
    occurrences: tuple[Occurrence, ...]


@dataclass(frozen=True)
class NegativeSet:
    """Documents that look alike but must all be kept (a pair, or a same-site set of pages)."""

    family: str
    members: tuple[str, ...]


@dataclass
class GroundTruth:
    """Everything the scorer needs to know about a generated corpus."""

    seed: int
    size: str
    corpus_sha256: str
    documents: dict[str, DocInfo]
    groups: list[Group] = field(default_factory=list)
    containments: list[Containment] = field(default_factory=list)
    fragments: list[Fragment] = field(default_factory=list)
    negatives: list[NegativeSet] = field(default_factory=list)
    semantic_pairs: list[tuple[str, str]] = field(default_factory=list)

    # ---- derived views -------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        roles: dict[str, int] = {}
        for info in self.documents.values():
            roles[info.role] = roles.get(info.role, 0) + 1
        return {
            "documents": len(self.documents),
            **{f"role_{k}": v for k, v in sorted(roles.items())},
            **{f"groups_{c}": sum(1 for g in self.groups if g.category == c) for c in "ABC"},
            **{f"group_docs_{c}": sum(len(g.members) for g in self.groups if g.category == c) for c in "ABC"},
            "containments": len(self.containments),
            "fragments": len(self.fragments),
            "fragment_occurrences": sum(len(f.occurrences) for f in self.fragments),
            "negative_sets": len(self.negatives),
            "semantic_pairs": len(self.semantic_pairs),
        }

    # ---- (de)serialisation ------------------------------------------------------------------------
    def to_json_obj(self) -> dict[str, object]:
        return {
            "format": TRUTH_FORMAT,
            "seed": self.seed,
            "size": self.size,
            "corpus_sha256": self.corpus_sha256,
            "documents": {k: asdict(v) for k, v in self.documents.items()},
            "groups": [
                {"group_id": g.group_id, "category": g.category, "members": list(g.members)} for g in self.groups
            ],
            "containments": [
                {"child": c.child, "parent": c.parent, "kind": c.kind, "span": list(c.span) if c.span else None}
                for c in self.containments
            ],
            "fragments": [
                {
                    "fragment_id": f.fragment_id,
                    "text": f.text,
                    "occurrences": [asdict(o) for o in f.occurrences],
                }
                for f in self.fragments
            ],
            "negatives": [{"family": n.family, "members": list(n.members)} for n in self.negatives],
            "semantic_pairs": [list(p) for p in self.semantic_pairs],
        }

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json_obj(), ensure_ascii=False, indent=1, sort_keys=False) + "\n")

    @classmethod
    def read(cls, path: Path) -> GroundTruth:
        try:
            obj = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise TruthError(f"{path}: cannot read ground truth: {exc}") from exc
        return cls.from_json_obj(obj, origin=str(path))

    @classmethod
    def from_json_obj(cls, obj: Mapping[str, Any], origin: str = "<truth>") -> GroundTruth:
        def need(key: str, typ: type) -> Any:
            if key not in obj:
                raise TruthError(f"{origin}: missing field '{key}'")
            val = obj[key]
            if not isinstance(val, typ):
                raise TruthError(f"{origin}: field '{key}' must be {typ.__name__}, got {type(val).__name__}")
            return val

        if obj.get("format") != TRUTH_FORMAT:
            raise TruthError(f"{origin}: field 'format' must be {TRUTH_FORMAT!r}, got {obj.get('format')!r}")
        try:
            documents: dict[str, DocInfo] = {}
            for k, v in need("documents", dict).items():
                if v.get("role") not in _ROLES:
                    raise TruthError(
                        f"{origin}: documents[{k!r}].role must be one of {sorted(_ROLES)}, got {v.get('role')!r}"
                    )
                documents[k] = DocInfo(role=v["role"], source=str(v["source"]), length=int(v["length"]))
            groups = [Group(g["group_id"], g["category"], tuple(g["members"])) for g in need("groups", list)]
            conts = [
                Containment(c["child"], c["parent"], c["kind"], (int(c["span"][0]), int(c["span"][1])) if c["span"] else None)
                for c in need("containments", list)
            ]
            frags = [
                Fragment(
                    f["fragment_id"],
                    f["text"],
                    tuple(Occurrence(o["doc_id"], int(o["start"]), int(o["end"])) for o in f["occurrences"]),
                )
                for f in need("fragments", list)
            ]
            negs = [NegativeSet(n["family"], tuple(n["members"])) for n in need("negatives", list)]
            sem = [(str(p[0]), str(p[1])) for p in need("semantic_pairs", list)]
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            raise TruthError(f"{origin}: malformed entry: {exc!r}") from exc
        return cls(
            seed=int(need("seed", int)),
            size=str(need("size", str)),
            corpus_sha256=str(need("corpus_sha256", str)),
            documents=documents,
            groups=groups,
            containments=conts,
            fragments=frags,
            negatives=negs,
            semantic_pairs=sem,
        )

    # ---- consistency --------------------------------------------------------------------------------
    def check(self, texts: Mapping[str, str] | None = None) -> None:
        """Raise :class:`TruthError` unless the truth is self-consistent (and consistent with ``texts``).

        Every referenced id exists; groups are disjoint and have ≥ 2 members; no document is in two
        labelled structures; roles match the structure a document is in; spans point at the planted text.
        """
        docs = self.documents
        owner: dict[str, str] = {}

        def claim(doc_id: str, what: str, role: set[str]) -> None:
            if doc_id not in docs:
                raise TruthError(f"{what} references unknown document id {doc_id!r}")
            if docs[doc_id].role not in role:
                raise TruthError(f"{what}: document {doc_id!r} has role {docs[doc_id].role!r}, expected {sorted(role)}")
            prev = owner.get(doc_id)
            if prev is not None and prev != what:
                raise TruthError(f"document {doc_id!r} is in both {prev} and {what}")
            owner[doc_id] = what

        for g in self.groups:
            if len(g.members) < 2 or len(set(g.members)) != len(g.members):
                raise TruthError(f"group {g.group_id} must have ≥ 2 distinct members, has {list(g.members)}")
            for m in g.members:
                claim(m, f"group {g.group_id}", {"group_member"})
        parents: set[str] = set()
        for c in self.containments:
            claim(c.child, f"containment child {c.child}", {"d_child"})
            if docs.get(c.parent) is None or docs[c.parent].role != "d_parent":
                raise TruthError(f"containment parent {c.parent!r} missing or not a d_parent")
            parents.add(c.parent)
            if texts is not None and c.span is not None:
                s, e = c.span
                if texts[c.parent][s:e] != texts[c.child]:
                    raise TruthError(f"containment span {c.span} of parent {c.parent} is not the child {c.child}'s text")
        for f in self.fragments:
            if len(f.occurrences) < 2:
                raise TruthError(f"fragment {f.fragment_id} must occur ≥ 2 times")
            for o in f.occurrences:
                claim(o.doc_id, f"fragment {f.fragment_id} host {o.doc_id}", {"e_host"})
                if not 0 <= o.start < o.end <= docs[o.doc_id].length:
                    raise TruthError(f"fragment {f.fragment_id}: span [{o.start}, {o.end}) outside {o.doc_id}")
                if texts is not None and texts[o.doc_id][o.start : o.end] != f.text:
                    raise TruthError(f"fragment {f.fragment_id}: span [{o.start}, {o.end}) of {o.doc_id} is not the passage")
        for i, n in enumerate(self.negatives):
            if len(n.members) < 2:
                raise TruthError(f"negative set #{i} ({n.family}) must have ≥ 2 members")
            for m in n.members:
                claim(m, f"negative set #{i} ({n.family})", {"negative"})
        for a, b in self.semantic_pairs:
            claim(a, f"semantic pair ({a}, {b})", {"semantic"})
            claim(b, f"semantic pair ({a}, {b})", {"semantic"})
        for doc_id, info in docs.items():
            if info.role == "d_parent" and doc_id not in parents:
                raise TruthError(f"document {doc_id!r} has role d_parent but no containment names it")
            if info.role not in ("background", "d_parent") and doc_id not in owner:
                raise TruthError(f"document {doc_id!r} has role {info.role!r} but no structure names it")
            if texts is not None:
                if doc_id not in texts:
                    raise TruthError(f"document {doc_id!r} of the truth is not in the corpus")
                if len(texts[doc_id]) != info.length:
                    raise TruthError(f"document {doc_id!r}: truth length {info.length} != corpus length {len(texts[doc_id])}")
        if texts is not None and len(texts) != len(docs):
            extra = sorted(set(texts) - set(docs))[:5]
            raise TruthError(f"corpus has {len(texts)} documents, truth {len(docs)}; e.g. not in truth: {extra}")


def duplicate_pair_test(truth: GroundTruth) -> Callable[[str, str], bool]:
    """``is_duplicate(x, y)``: whether two documents are duplicates by the truth — members of one
    A–C group, or a containment (D) pair."""
    group = {m: g.group_id for g in truth.groups for m in g.members}
    contained = {frozenset((c.child, c.parent)) for c in truth.containments}

    def is_duplicate(x: str, y: str) -> bool:
        gx = group.get(x)
        return (gx is not None and gx == group.get(y)) or frozenset((x, y)) in contained

    return is_duplicate


def read_corpus(path: Path) -> list[dict[str, object]]:
    """Read a corpus JSONL file (``{"id": str, "text": str}`` per line), checking each line."""
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    try:
        records = list(iter_json_objects(Path(path)))
    except InputError as exc:
        raise TruthError(str(exc)) from exc
    for lineno, obj in records:
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
            raise TruthError(f"{path}:{lineno}: field 'id' must be a string")
        if not isinstance(obj.get("text"), str):
            raise TruthError(f"{path}:{lineno}: field 'text' must be a string")
        if obj["id"] in seen:
            raise TruthError(f"{path}:{lineno}: duplicate id {obj['id']!r}")
        seen.add(obj["id"])
        out.append(obj)
    return out


def write_corpus(path: Path, records: Iterable[Mapping[str, object]]) -> None:
    """Write records as JSONL, one compact JSON object per line, keys in insertion order."""
    with Path(path).open("w", encoding="utf-8", newline="\n") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
