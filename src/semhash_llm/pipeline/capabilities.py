"""What a stage declares about itself, so the cascade asks instead of guessing.

Every stage class sets ``capabilities = Capabilities(...)`` (the default, :data:`NONE`, is a
stage that only links pairs). The cascade, the checkpoints and the other stages read these
fields instead of probing the stage's attributes; a declared role promises the method or
attribute named with it, which :func:`check_capabilities` verifies once when the stage is built:

- ``claims_documents`` — it clears the ``featured`` bit of documents it settles while the input
  streams (the Bloom stage's hits skip MinHash and SPH), so it must run again on resume
  whenever a later stage needs features;
- ``reads_features_of`` — the stages whose streamed features its ``decide`` reads (LSH hands
  its deferred pairs to AW-MinHash and the verifier): on resume those stages stream again;
- ``handoff_fields`` — the attributes it leaves for later stages after ``decide`` (deferred
  pairs, counters, referred pairs), which a checkpoint stores and restores;
- ``adjudicates`` — it re-decides the verifier's uncertain pairs (the judge), so the verifier
  refers them instead of deciding them alone;
- ``cover_rank`` — it answers the cover check (:meth:`covers`, see
  :mod:`semhash_llm.pipeline.cover`), asked in rank order, lowest first: the estimates on
  signatures (AW-MinHash 10, LSH 20, SPH 30), then the chains of containment edges (rank
  :data:`CONTAINMENT_RANK`, read from the edges themselves), then the stages that read the
  texts (the verifier 90); ``None``: not asked. Its answer reads its streamed features
  (MinHash or weighted signatures, SPH codes, the verifier's token counts), so on resume they
  stream again until selection is checkpointed (:attr:`Capabilities.cover_evidence`);
- ``defers_pairs`` — it hands pairs to the verifier: a ``deferred_`` buffer
  (:class:`~semhash_llm.sketch.lsh.Deferred`) and ``counters_`` (``counters_[0]``: pairs it
  proposed), which the verifier reads;
- ``offers_deferral`` — it takes the linking stages' pairs of short documents (the verifier):
  ``deferral(rows)`` and ``is_short(docs)``;
- ``offers_confirmation`` — the linking stages confirm their pairs on its signatures
  (AW-MinHash): ``confirmation(rows, threshold)``;
- ``refers_uncertain`` — it leaves its uncertain pairs in ``referred_`` for a stage that
  adjudicates (the verifier for the judge);
- ``logs_pairs`` — ``pair_log()`` is a per-pair record written as ``<stage>_pairs.parquet``;
- ``shuffles_buckets`` — its LSH bucket grouping may run on an engine: it has a ``bucketer``
  attribute the cascade sets to the engine's shuffle.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Capabilities", "NONE", "CONTAINMENT_RANK", "capabilities_of", "check_capabilities"]

CONTAINMENT_RANK = 50
"""Where the chains of containment edges stand among the cover check's answers."""


@dataclass(frozen=True)
class Capabilities:
    """A stage's declared behaviour towards the rest of the cascade (see the module docstring)."""

    claims_documents: bool = False
    reads_features_of: tuple[str, ...] = ()
    handoff_fields: tuple[str, ...] = ()
    adjudicates: bool = False
    cover_rank: int | None = None
    defers_pairs: bool = False
    offers_deferral: bool = False
    offers_confirmation: bool = False
    refers_uncertain: bool = False
    logs_pairs: bool = False
    shuffles_buckets: bool = False

    @property
    def cover_evidence(self) -> bool:
        """Whether the cover check reads its streamed features: it answers the check."""
        return self.cover_rank is not None


NONE = Capabilities()
"""A stage that only links its own pairs."""

_PROMISES: dict[str, tuple[str, ...]] = {
    "cover_rank": ("covers",),
    "defers_pairs": ("deferred_", "counters_"),
    "offers_deferral": ("deferral", "is_short"),
    "offers_confirmation": ("confirmation",),
    "refers_uncertain": ("referred_",),
    "logs_pairs": ("pair_log",),
    "shuffles_buckets": ("bucketer",),
}


def capabilities_of(stage: object) -> Capabilities:
    """The stage's declared :class:`Capabilities` (:data:`NONE` when it declares none)."""
    caps = getattr(stage, "capabilities", NONE)
    if not isinstance(caps, Capabilities):
        raise TypeError(f"stage {getattr(stage, 'name', stage)!r}: capabilities must be a Capabilities record, "
                        f"got {type(caps).__name__}")
    return caps


def check_capabilities(stage: object) -> Capabilities:
    """The stage's :class:`Capabilities`, after checking that it has what each declared role
    promises (a ``TypeError`` naming the stage, the role and what is missing)."""
    caps = capabilities_of(stage)
    name = getattr(stage, "name", stage)
    for role, needs in _PROMISES.items():
        value = getattr(caps, role)
        if value is None or value is False:
            continue
        missing = [attr for attr in needs if not hasattr(stage, attr)]
        if missing:
            raise TypeError(f"stage {name!r} declares {role} but has no {', '.join(missing)}: add "
                            f"{' and '.join(missing)} to the stage, or drop {role} from its capabilities")
    for field in caps.handoff_fields:
        if not hasattr(stage, field):
            raise TypeError(f"stage {name!r} declares hand-off field {field!r} but has no such attribute after "
                            "it is built: set it in __init__, or drop it from handoff_fields")
    return caps
