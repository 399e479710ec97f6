"""The LLM judge: prompts, backends, the verdict cache and the confidence-weighted ensemble.

:mod:`~semhash_llm.judge.prompt` (criteria, few-shot examples, strict reply parsing),
:mod:`~semhash_llm.judge.backends` (OpenAI-compatible HTTP and local GGUF backends behind one
:class:`~semhash_llm.judge.backends.Judge` protocol), :mod:`~semhash_llm.judge.cache` (SQLite)
and :mod:`~semhash_llm.judge.fusion` (routing, calibration, fusion). The cascade stage is
:class:`semhash_llm.stages.judge.JudgeStage`.
"""

from semhash_llm.judge.backends import Judge, LocalJudge, OpenAIJudge
from semhash_llm.judge.prompt import PROMPT_VERSION, Verdict

__all__ = ["Judge", "LocalJudge", "OpenAIJudge", "PROMPT_VERSION", "Verdict"]
