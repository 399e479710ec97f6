"""LLM backend faults over real HTTP: a local server (the standard library's) that answers HTTP 500,
503 then a verdict, 400, a body that is not JSON, JSON without choices, an empty reply, and
too late. Each gives the documented failure kind (retried where it should be), and in the
cascade the pair keeps the automatic decision and the report counts the kind."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers import RECORDS

from semhash_llm.judge.backends import OpenAIJudge

PAIR = ("The bridge will close on 3 May.", "The brigde will close on 3 May.")
VERDICT = {"choices": [{"message": {"content": "Yes"}, "logprobs": {"content": [{"token": "Yes", "top_logprobs": [
    {"token": "Yes", "logprob": -0.1}, {"token": "No", "logprob": -2.4}]}]}}]}


class _Handler(BaseHTTPRequestHandler):
    hits: dict[str, int] = {}

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = self.path.strip("/").split("/")[0]
        n = _Handler.hits[mode] = _Handler.hits.get(mode, 0) + 1
        if mode == "http500":
            self._send(500, b'{"error": "boom"}')
        elif mode == "flaky" and n == 1:  # busy once, then fine: retried
            self._send(503, b"{}")
        elif mode == "bad_request":
            self._send(400, b'{"error": "no"}')
        elif mode == "garbage":
            self._send(200, b"<html>\x00\xff not json")
        elif mode == "nochoices":
            self._send(200, b'{"object": "error", "message": "overloaded"}')
        elif mode == "empty":
            self._send(200, json.dumps({"choices": [{"message": {"content": ""}}]}).encode())
        elif mode == "slow":
            time.sleep(1.5)
            self._send(200, json.dumps(VERDICT).encode())
        else:
            self._send(200, json.dumps(VERDICT).encode())


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("mode,error,calls", [
    ("http500", "http_500", 3),  # 5xx: retried twice
    ("bad_request", "http_400", 1),  # other 4xx: not retried
    ("garbage", "unparsable", 1),
    ("nochoices", "unparsable", 1),
    ("empty", "empty", 1),
    ("slow", "timeout", 3),
])
def test_each_fault_is_a_failed_verdict_of_its_kind(server: str, mode: str, error: str, calls: int) -> None:
    judge = OpenAIJudge(f"{server}/{mode}/v1", "m", timeout=0.4, retries=2, backoff=0.01, concurrency=1)
    [verdict] = judge.judge([PAIR])
    assert verdict.p_yes is None and verdict.error == error and judge.calls == calls


def test_a_busy_server_is_retried_and_answers(server: str) -> None:
    judge = OpenAIJudge(f"{server}/flaky/v1", "m", retries=2, backoff=0.01, concurrency=1)
    [verdict] = judge.judge([PAIR])
    assert judge.calls == 2 and verdict.p_yes == pytest.approx(1 / (1 + 2.718281828 ** -2.3), abs=1e-3)


torch = pytest.importorskip("torch")


def test_faults_in_the_cascade_keep_the_automatic_decision_and_are_counted(server: str, tiny_model: Path) -> None:
    from semhash_llm import PipelineConfig, deduplicate

    base = {"verifier": {"model_path": str(tiny_model), "threshold": 0.4, "uncertain_margin": 1.0},
            "sph": {"radius": 64}, "select": {"keep": "first"}}
    plain = deduplicate(RECORDS, PipelineConfig.from_dict(base))
    keep = ["id", "action", "duplicate_of", "decided_by"]
    for mode, kind in (("garbage", "unparsable"), ("empty", "empty"), ("http500", "http_500")):
        cfg = PipelineConfig.from_dict({**base, "judge": {
            "backend": "openai", "url": f"{server}/{mode}/v1", "model": "m", "use_cache": False, "max_fraction": 1.0,
            "retries": 1, "backoff": 0.01, "timeout": 5}})
        res = deduplicate(RECORDS, cfg)
        d = next(s for s in res.report["funnel"] if s["stage"] == "judge")["details"]
        assert d["pairs_judged"] == 0 and d["failures"] == {kind: d["pairs_routed"]} and d["pairs_routed"] >= 2
        assert {r["outcome"] for r in res.pair_logs["judge"].to_pylist()} == {f"failed:{kind}"}
        assert res.documents.select(keep).to_pylist() == plain.documents.select(keep).to_pylist()
