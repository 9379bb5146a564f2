#!/usr/bin/env bash
# Runs every test, in order: formatting, clippy, the native Rust tests (CPU reference and GPU on
# Mesa lavapipe when there is no GPU), the wasm build, and the browser tests (headless Chromium,
# WebGPU on SwiftShader). Installs what is missing on a fresh Debian 12 machine when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

step_name=""
step_start=0
step() {
  end_step
  step_name="$*"
  step_start=$SECONDS
  printf '\n==== %s\n' "$step_name"
}
end_step() {
  if [ -n "$step_name" ]; then printf -- '---- %s: %d s\n' "$step_name" $((SECONDS - step_start)); fi
  step_name=""
}

step "system packages"
need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
[ -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || need_apt+=(mesa-vulkan-drivers)
command -v node >/dev/null || need_apt+=(nodejs npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "error: missing ${need_apt[*]}; run as root or: sudo apt-get install -y ${need_apt[*]}" >&2
    exit 1
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${need_apt[@]}"
else
  echo "chromium, mesa-vulkan-drivers (lavapipe) and node are installed"
fi
echo "node $(node --version)"

step "rustup components"
if command -v rustup >/dev/null; then
  installed=$(rustup component list --installed)
  for c in rustfmt clippy; do
    grep -q "^$c" <<<"$installed" || rustup component add "$c"
  done
fi
cargo --version

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --all-targets --profile fast -- -D warnings

step "cargo test"
# Mesa's device-select Vulkan layer connects to Wayland when a Vulkan instance is made; without
# XDG_RUNTIME_DIR libwayland prints a harmless "error: XDG_RUNTIME_DIR is invalid" for every
# device the tests open (the CLI turns the layer off itself). Give it an empty private one.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d)
  export XDG_RUNTIME_DIR
  trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
fi
cargo test --profile fast

step "cargo test: the direct linear kernels on SwiftShader's Vulkan driver"
# lavapipe runs the direct family's linear layers in linear_blocks.wgsl; every other CPU-like
# device (the browser's SwiftShader among them) in linear_direct.wgsl. Chromium ships SwiftShader
# as a Vulkan driver: the one test of that kernel against the CPU reference runs on it too, on
# Vulkan alone so that nothing else can stand in for it.
WGPU_BACKEND=vulkan VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json \
  cargo test --profile fast --test kernels direct_linear_matches_reference -- --nocapture

step "build wasm"
bash scripts/build-wasm.sh

step "cargo clippy (wasm32: the browser edge, web.rs)"
if rustup target list --installed 2>/dev/null | grep -q '^wasm32-unknown-unknown$'; then
  cargo clippy --lib --release --target wasm32-unknown-unknown --target-dir target/wasm -- -D warnings
else
  echo "skipped: rustup has no wasm32 std here (the wasm was built with Debian's compiler)"
fi

step "npm ci"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  echo "node_modules is up to date with package-lock.json"
fi

step "browser tests"
node --test web/tests/

end_step
printf '\nall tests passed in %d s\n' "$SECONDS"
