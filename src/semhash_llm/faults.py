"""A fault hook for tests: the process kills itself at a named point of a run.

``SEMHASH_LLM_FAILPOINT=after:<step>`` sends SIGKILL to the process as soon as ``<step>`` is
complete (its checkpoint written); ``during:<step>`` once it has begun and nothing of it is
kept (for a stage's decision and ``select``: as they start, every earlier step kept; for
``read``: after the first batch was streamed; for ``write``: after ``documents.parquet`` is
written, before the kept output, ``report.json`` and the checkpoints' removal). Steps: ``read``, every stage name
(``bloom``, ``lsh``, ``aw``, ``sph``, ``mgfn``, ``judge``, ``passages``), ``select``,
``write``. Several points may be given, separated by commas. SIGKILL is what an
out-of-memory killer or a lost machine does: no handler, no clean-up, nothing flushed.
"""

from __future__ import annotations

import os
import signal

__all__ = ["failpoint", "ENV", "POINTS"]

ENV = "SEMHASH_LLM_FAILPOINT"
POINTS = ("after", "during")


def failpoint(point: str, step: str) -> None:
    """Kill this process with SIGKILL if ``SEMHASH_LLM_FAILPOINT`` names ``point:step``."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    if f"{point}:{step}" in (w.strip() for w in wanted.split(",")):
        os.kill(os.getpid(), signal.SIGKILL)
