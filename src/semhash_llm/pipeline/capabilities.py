"""What a stage declares about itself, so the cascade asks instead of guessing.

Every stage class sets ``capabilities = Capabilities(...)`` (the default, :data:`NONE`, is a
stage that only links pairs). The cascade, the checkpoints and the other stages read these
fields instead of probing the stage's attributes:

- ``claims_documents`` — it clears the ``featured`` bit of documents it settles while the input
  streams (the Bloom stage's hits skip MinHash and SPH), so it must run again on resume
  whenever a later stage needs features;
- ``reads_features_of`` — the stages whose streamed features its ``decide`` reads (LSH hands
  its deferred pairs to AW-MinHash and the verifier): on resume those stages stream again;
- ``handoff_fields`` — the attributes it leaves for later stages after ``decide`` (deferred
  pairs, counters, referred pairs), which a checkpoint stores and restores;
- ``adjudicates`` — it re-decides the verifier's uncertain pairs (the judge), so the verifier
  refers them instead of deciding them alone;
- ``cover_evidence`` — the cover check before selection (``cascade._cover_fn``) reads its
  streamed features (MinHash or weighted signatures, the verifier's reading of two texts), so
  on resume they stream again until selection is checkpointed.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Capabilities", "NONE", "capabilities_of"]


@dataclass(frozen=True)
class Capabilities:
    """A stage's declared behaviour towards the rest of the cascade (see the module docstring)."""

    claims_documents: bool = False
    reads_features_of: tuple[str, ...] = ()
    handoff_fields: tuple[str, ...] = ()
    adjudicates: bool = False
    cover_evidence: bool = False


NONE = Capabilities()
"""A stage that only links its own pairs."""


def capabilities_of(stage: object) -> Capabilities:
    """The stage's declared :class:`Capabilities` (:data:`NONE` when it declares none)."""
    caps = getattr(stage, "capabilities", NONE)
    if not isinstance(caps, Capabilities):
        raise TypeError(f"stage {getattr(stage, 'name', stage)!r}: capabilities must be a Capabilities record, "
                        f"got {type(caps).__name__}")
    return caps
