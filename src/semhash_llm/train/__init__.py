"""Training commands for the learned parts of SemHash-LLM (``semhash-llm train ...``)."""

from __future__ import annotations
