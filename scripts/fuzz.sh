#!/usr/bin/env bash
# A long fuzzing campaign over every parser of outside bytes (crate/tests/fuzz.rs): the
# safetensors stream, the GGUF stream (and the tokenizer from its metadata), the sharded index,
# config.json, tokenizer_config.json and its chat template, the judgment request. Prints the inputs tried per target; any panic or hang fails.
# Usage: scripts/fuzz.sh [INPUTS_PER_TARGET]   (default 100000; the test suite runs 300)
set -euo pipefail
cd "$(dirname "$0")/.."
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
ONETOKEN_FUZZ_ITERATIONS=${1:-100000} cargo test --profile fast --test fuzz -- --nocapture --test-threads 2
