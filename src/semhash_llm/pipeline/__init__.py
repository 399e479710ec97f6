"""The cascade's plumbing, apart from the stages themselves, one module per step.

- :mod:`semhash_llm.pipeline.edges` — :class:`EdgeKind`, the kind of an accepted pair, and the
  relation and deciding stage each kind is reported as in ``documents.parquet``.
- :mod:`semhash_llm.pipeline.registry` — the stages in cascade order (:func:`stages`): each one's
  name (``--no-<name>``, ``--only``, the funnel), config section and how it is built;
  :func:`register` adds a stage of one's own.
- :mod:`semhash_llm.pipeline.capabilities` — the :class:`Capabilities` record each stage class
  declares (what it reads, hands on, claims, adjudicates, answers).
- :mod:`semhash_llm.pipeline.stream` — reading the source in batches through every stage's ``process``.
- :mod:`semhash_llm.pipeline.decide` — every stage's ``decide``, in order, into one union-find.
- :mod:`semhash_llm.pipeline.cover` and :mod:`semhash_llm.pipeline.select` — the cover check
  (each stage's ``covers``) and the survivors.
- :mod:`semhash_llm.pipeline.fragments` — cuts of repeated passages and ``contained_in``,
  decided after selection.
- :mod:`semhash_llm.pipeline.checkpoints` — each step kept for resume.
- :mod:`semhash_llm.pipeline.funnel` — the funnel rows of ``report.json``.

:mod:`semhash_llm.cascade` strings the steps together. None of these imports the cascade, so
the index, the engines and the CLI read the registry without an import cycle.
"""
