#!/usr/bin/env bash
# Set up, then run the type checker on src/ and the test suite (offline, CPU only).
# Without arguments the slow tests (which read ../shared/data) are left out; arguments go to
# pytest instead, e.g. `bash scripts/test.sh -m slow` or `bash scripts/test.sh tests/test_sketch.py`.
set -euo pipefail
cd "$(dirname "$0")/.."
SEMHASH_LLM_EXTRAS="${SEMHASH_LLM_EXTRAS:-dev,ml,llm,ray,datatrove}" bash scripts/setup.sh
# report.html is checked in headless Chromium (Debian's chromium) where it can be installed;
# without it those tests are skipped and say so.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y -q chromium >/dev/null 2>&1 || echo "chromium not installed: the browser tests are skipped" >&2
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
.venv/bin/python -m mypy src/semhash_llm
set +e
if [ "$#" -eq 0 ]; then set -- -m "not slow"; fi
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
