#!/usr/bin/env bash
# The real-GPU measurement in one go: bench with per-kernel profiles for Qwen2.5 0.5B and 1.5B
# (synthetic weights: no files needed), the tiled kernels against the barrier-free ones, and the
# prefill fixed-cost check (8 vs 9 tokens), each threshold where the tiled kernels change path
# moved to either side (--tune), the quantized formats (decode bytes vs time), the GPU
# test executables where they lie beside the binary (every kernel and the whole forward against
# their CPU references, on this GPU: the figures mean something only if these pass), and the
# PyTorch peer where it is there. scripts/gpu-prepare.sh bundles the binary, the tests and the
# peer into .dev/. At most 8 files come back from a device run: this writes 8 (the tests report
# in the log). Every command has its own timeout, so one slow step cannot eat the rest, and all
# of them fit in BUDGET seconds (default 540: a device run may last 600), most important first,
# so a slow device still returns the log and the first files whole. Usage:
#   [BUDGET=seconds] scripts/gpu-bench.sh OUT_DIR [ONETOKEN_BINARY]
set -uo pipefail
out=${1:?usage: scripts/gpu-bench.sh OUT_DIR [ONETOKEN_BINARY]}
bin=${2:-target/release/onetoken}
budget=${BUDGET:-540}
mkdir -p "$out"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
log="$out/gpu-bench.log"
# step SECONDS NAME OUTPUT COMMAND...: COMMAND under a timeout of at most SECONDS (less where
# the budget has less left), its stdout into OUTPUT, its stderr into the log.
# bench's stderr gives each step's figures as it ends: a bench cut off by its timeout leaves
# what it measured in the log.
step() {
  local seconds=$1 name=$2 output=$3
  shift 3
  local left=$((budget - SECONDS))
  if ((left < 15)); then
    echo "-- $name: skipped, ${left} s of the budget left" | tee -a "$log"
    return
  fi
  ((seconds > left)) && seconds=$left
  echo "== $name (at most $seconds s): $*" | tee -a "$log"
  local start=$SECONDS
  timeout "$seconds" "$@" >"$output" 2>>"$log"
  echo "-- $name: exit $? in $((SECONDS - start)) s" | tee -a "$log"
}
# run SECONDS NAME ARGS...: the binary with ARGS, its JSON into OUT_DIR/NAME.json.
run() {
  local seconds=$1 name=$2
  shift 2
  step "$seconds" "$name" "$out/$name.json" "$bin" "$@"
}
for n in 8 9 32; do
  ids=$(seq -s, 1 "$n")
  run 60 "logits-$n" logits --synthetic qwen2.5-0.5b --ids "$ids" --top-k 5
done
# At most 8 files come back from a device run: the three logits lines go in one.
cat "$out"/logits-*.json >"$out/logits.jsonl" && rm -f "$out"/logits-*.json
lengths=8,9,16,32,33,64,128,512,1024
run 240 bench-0.5b bench --synthetic qwen2.5-0.5b --json --profile --lengths "$lengths" --batch-sizes 1,8,64 --repeats 3
# The kernels and the forward against their CPU references on this GPU, output in the log
# (failures in full), fixtures from the working tree.
tests=$(dirname "$bin")/tests
export ONETOKEN_TEST_FIXTURES=$PWD/crate/tests/fixtures
for t in kernels gpu_forward judge; do
  if [ -x "$tests/$t" ]; then
    step 120 "test-$t" "$log.part" "$tests/$t" -q
    [ -f "$log.part" ] && cat "$log.part" >>"$log" && rm "$log.part"
  fi
done
run 240 bench-1.5b bench --synthetic qwen2.5-1.5b --json --profile --lengths 128,1024 --batch-sizes 1,8 --repeats 3
# Each threshold of the tiled kernels moved (--tune; the defaults are in bench-0.5b.json's
# device.tuning), at the lengths where it acts: decode attention split later or never; fewer
# rows on matvec; no split-K; all matmuls in 64 x 64 tiles, then all in 32 x 32.
sweep=(
  "split-attention-after=256|128,1024|1"
  "split-attention-after=100000|128,1024|1"
  "matvec-max-rows=8|9,16,32,33|1"
  "split-k-below-tiles=0|33,64,128,512|1"
  "matmul-64-from-tiles=0|33,64,128,512|1"
  "matmul-64-from-tiles=100000|512,1024|64"
)
for i in "${!sweep[@]}"; do
  IFS='|' read -r tune lengths batches <<<"${sweep[$i]}"
  run 45 "tuned-$i" bench --synthetic qwen2.5-0.5b --json --profile --tune "$tune" --lengths "$lengths" --batch-sizes "$batches" --repeats 3
done
# One document a line, in the order above (each names its tuning in device.tuning).
cat "$out"/tuned-*.json >"$out/bench-0.5b-tuned.jsonl" 2>/dev/null; rm -f "$out"/tuned-*.json
for q in q8_0 q5_0 q4_0; do
  run 120 "bench-0.5b-$q" bench --synthetic qwen2.5-0.5b --json --quant "$q" --lengths 32,512 --batch-sizes 1 --repeats 3
done
# One document a line, in the order above.
cat "$out"/bench-0.5b-q*.json >"$out/bench-0.5b-quant.jsonl" && rm -f "$out"/bench-0.5b-q*.json
run 120 bench-0.5b-direct bench --synthetic qwen2.5-0.5b --json --kernels direct --lengths 32,128 --batch-sizes 1 --repeats 1
# The PyTorch peer (HF transformers, eager) on the same GPU, where the script and python3 are
# there (gpu.md: copied into .dev/ beside the binary).
peer=$(dirname "$bin")/torch_peer.py
if [ -f "$peer" ] && command -v python3 >/dev/null; then
  left=$((budget - SECONDS))
  if ((left >= 15)); then
    echo "== torch-peer (at most $left s): python3 $peer" | tee -a "$log"
    timeout "$left" python3 "$peer" "$out/torch-peer.json" >>"$log" 2>&1
    echo "-- torch-peer: exit $?" | tee -a "$log"
  else
    echo "-- torch-peer: skipped, ${left} s of the budget left" | tee -a "$log"
  fi
fi
echo "done: $(ls "$out")" | tee -a "$log"
