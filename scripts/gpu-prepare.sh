#!/usr/bin/env bash
# Prepares, on this machine, what a GPU machine without a Rust toolchain or network needs to run
# scripts/gpu-bench.sh: the Vulkan loader as a Debian package in .gl/, and in .dev/ the release
# binary, the GPU test executables (kernels, gpu_forward, judge: every kernel and the whole
# forward against their CPU references, on that GPU) and, where given, the PyTorch peer script.
# Both folders are git-ignored; carry them to the GPU machine with the working tree. Usage:
#   scripts/gpu-prepare.sh [TORCH_PEER_SCRIPT]
set -euo pipefail
cd "$(dirname "$0")/.."
peer=${1:-}
mkdir -p .gl .dev/tests
rm -f .gl/*.deb .dev/tests/*

# The loader for the GPU machine's architecture (x86-64), whatever this machine's lists hold.
lists=$(mktemp -d)
mkdir -p "$lists/partial"
apt_amd64=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$lists")
apt-get "${apt_amd64[@]}" update >/dev/null
(cd .gl && apt-get "${apt_amd64[@]}" download libvulkan1 >/dev/null)
rm -rf "$lists"

cargo build --release -p onetoken
cp target/release/onetoken .dev/onetoken
strip .dev/onetoken

# The test executables, by their target names, from cargo's own report of what it built.
cargo test --profile fast --no-run --test kernels --test gpu_forward --test judge --message-format=json |
  python3 -c '
import json, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        shutil.copy(m["executable"], ".dev/tests/" + m["target"]["name"])
'
strip .dev/tests/*

if [ -n "$peer" ]; then cp "$peer" .dev/torch_peer.py; fi
ls .gl .dev .dev/tests
# A device run takes the working tree (tracked and untracked files not ignored) and the carried
# folders, 64 MiB in all: say how much of it this is, and stop here if it would not travel.
# (A tracked file deleted here is listed by git but does not travel.)
tree=$(git ls-files -co --exclude-standard -z | while IFS= read -rd '' f; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done |
  du -cb --files0-from=- | tail -1 | cut -f1)
carried=$(du -sb .gl .dev | awk '{n += $1} END {print n}')
total=$((tree + carried))
echo "travels: $((total >> 20)) MiB (working tree $((tree >> 20)) MiB, .gl and .dev $((carried >> 20)) MiB) of 64 MiB"
if ((total > 64 << 20)); then
  echo "too large for a device run: carry less (the GPU tests in .dev/tests are the largest part)" >&2
  exit 1
fi
