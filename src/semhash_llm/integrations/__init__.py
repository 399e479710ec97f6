"""Steps for other data-processing frameworks. Each module imports its framework; this package imports none.

* :mod:`semhash_llm.integrations.datatrove` — :class:`~semhash_llm.integrations.datatrove.SemHashDedup`,
  a datatrove ``PipelineStep`` (``pip install 'semhash-llm[datatrove]'``).
"""
