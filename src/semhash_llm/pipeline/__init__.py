"""The cascade's plumbing, apart from the stages themselves.

- :mod:`semhash_llm.pipeline.edges` — :class:`EdgeKind`, the kind of an accepted pair, and the
  relation and deciding stage each kind is reported as in ``documents.parquet``.
- :mod:`semhash_llm.pipeline.registry` — the stages in cascade order (:data:`STAGES`): each one's
  name (``--no-<name>``, ``--only``, the funnel), config section and how it is built.

Neither imports :mod:`semhash_llm.cascade`, so the index, the engines and the CLI read the
registry without an import cycle.
"""
