#!/usr/bin/env bash
# Set up, build the offline sample corpus, deduplicate it and print the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/semhash-llm sample-corpus runs/sample
.venv/bin/semhash-llm dedup runs/sample/sample.jsonl --output runs/sample-out "$@"
.venv/bin/semhash-llm check-sample runs/sample/sample.truth.json runs/sample-out
