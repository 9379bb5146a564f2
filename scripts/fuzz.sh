#!/usr/bin/env bash
# Fuzzing of every parser of outside bytes: the safetensors stream, the GGUF stream (and the
# tokenizer from its metadata), the sharded index, config.json, tokenizer_config.json and its
# chat template, the judgment request. Any panic, hang or runaway allocation fails.
#
# Usage:
#   scripts/fuzz.sh [INPUTS_PER_TARGET]     structured campaign (crate/tests/fuzz.rs) on the
#                                           stable toolchain; default 100000 (the test suite runs 300)
#   scripts/fuzz.sh coverage [SECONDS]      coverage-guided, with cargo-fuzz (libFuzzer) on the
#                                           nightly toolchain, SECONDS per target (default 300),
#                                           seeded with the test fixtures (crate/fuzz/)
set -euo pipefail
cd "$(dirname "$0")/.."
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}

if [ "${1:-}" != coverage ]; then
  ONETOKEN_FUZZ_ITERATIONS=${1:-100000} cargo test --profile fast --test fuzz -- --nocapture --test-threads 2
  exit
fi

seconds=${2:-300}
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "error: coverage-guided fuzzing needs a nightly toolchain: rustup toolchain install nightly" >&2
  exit 1
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
fixtures=crate/tests/fixtures
corpus=crate/fuzz/corpus
seed() { # seed TARGET NAME PREFIX_BYTE FILE
  mkdir -p "$corpus/$1"
  { printf "\\x$3"; cat "$4"; } >"$corpus/$1/$2"
}
seed safetensors tiny 05 "$fixtures/tiny-qwen2/model.safetensors"
seed gguf tiny 05 "$fixtures/tiny-qwen2/model.gguf"
seed json config 00 "$fixtures/tiny-qwen2/config.json"
seed json config-0.5b 00 "$fixtures/qwen2.5-0.5b/config.json"
printf '\x01{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}' >"$corpus/json/index"
printf '\x02{"system": "s", "user": "u", "choices": ["a", "b"], "prefix": "{\\"choice\\": \\""}' >"$corpus/json/request"
mkdir -p "$corpus/chat_template"
cp "$fixtures/tiny-qwen2/tokenizer_config.json" "$corpus/chat_template/tiny"
cp "$fixtures/qwen2.5-0.5b/tokenizer_config.json" "$corpus/chat_template/qwen2.5"

cd crate
for target in safetensors gguf json chat_template; do
  echo "== $target: $seconds s"
  cargo +nightly fuzz run -s none -O "$target" -- -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 2>&1 | grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb|==|SUMMARY|.*panicked)" || true
  if compgen -G "fuzz/artifacts/$target/*" >/dev/null; then
    echo "error: $target: inputs that fail are in crate/fuzz/artifacts/$target/" >&2
    exit 1
  fi
done
echo "no crash, hang or runaway allocation"
