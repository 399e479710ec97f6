#!/usr/bin/env bash
# Create .venv and install SemHash-LLM with its test and benchmark dependencies.
# PyTorch's CPU build (2.13.0) is installed first so that nothing pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do command -v "$cand" >/dev/null 2>&1 && { PY="$cand"; break; }; done
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q --upgrade pip 2>/dev/null || true
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q "torch==2.13.0"
# Extras: SEMHASH_LLM_EXTRAS (default dev,ml); the test script adds llm (the judge's llama.cpp,
# compiled once with -DGGML_NATIVE=OFF: a portable build, and the one whose CPU code paths ran here).
EXTRAS="${SEMHASH_LLM_EXTRAS:-dev,ml}"
case ",$EXTRAS," in
  *,llm,*) .venv/bin/python -c "import llama_cpp" 2>/dev/null || \
      CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" .venv/bin/python -m pip install -q "llama-cpp-python[server]>=0.3.20,<0.4" ;;
esac
.venv/bin/python -m pip install -q -e ".[$EXTRAS]"
