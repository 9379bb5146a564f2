#!/usr/bin/env bash
# Builds the browser package: the onetoken crate for wasm32, wasm-bindgen's JS glue, and the
# bundled Qwen2.5 tokenizer files, all into web/pkg/ (git-ignored).
#   web/pkg/onetoken.js, onetoken_bg.wasm      import ./pkg/onetoken.js from the page
#   web/pkg/assets/qwen2.5/                    tokenizer.json, tokenizer_config.json, config.json
# Installs what it needs on a fresh machine: the wasm32 std (rustup, or Debian's compiler that
# builds std from source) and wasm-bindgen-cli (into .tools/, git-ignored).
# The release profile has fat LTO: a clean build takes ~2.5 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

WASM_BINDGEN_VERSION=0.2.130 # must equal the `wasm-bindgen = "=..."` pin in crate/Cargo.toml
TARGET=wasm32-unknown-unknown

step_start=0
step() { step_start=$SECONDS; echo "== build-wasm: $*"; }
done_step() { echo "   done in $((SECONDS - step_start)) s"; }

# 1. A compiler with the wasm32 std. rustup's prebuilt std when it can get it; otherwise Debian's
#    rustc-web, which builds std from source (needs nightly flags, hence RUSTC_BOOTSTRAP).
step "wasm32 std"
cargo_cmd=(cargo)
build_env=()
build_flags=()
target_dir=target/wasm
if command -v rustup >/dev/null && { rustup target list --installed | grep -qx "$TARGET" ||
  rustup target add "$TARGET"; }; then
  echo "   rustup toolchain: $(rustc --version)"
else
  echo "   rustup cannot provide the $TARGET std; using Debian's rustc-web with -Zbuild-std"
  if [ ! -x /usr/bin/rustc ] || [ ! -d /usr/lib/rustlib/src/rust/library ] ||
    [ ! -x /usr/lib/llvm-19/bin/wasm-ld ]; then
    [ "$(id -u)" = 0 ] || { echo "error: run as root, or: apt-get install rustc-web cargo-web rust-web-src lld-19" >&2; exit 1; }
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y rustc-web cargo-web rust-web-src lld-19
  fi
  build_env=(RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=/usr/lib/llvm-19/bin/wasm-ld)
  cargo_cmd=(/usr/bin/cargo)
  build_flags=(-Zbuild-std=std,panic_abort)
  target_dir=target/wasm-debian # another compiler: keep its artifacts apart
fi
done_step

# 2. wasm-bindgen-cli, exactly the version of the wasm-bindgen crate.
step "wasm-bindgen-cli $WASM_BINDGEN_VERSION"
wasm_bindgen="$root/.tools/bin/wasm-bindgen"
if [ "$("$wasm_bindgen" --version 2>/dev/null || true)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  # No --locked: one of its locked dependency versions is not served by the registry here.
  # A host tool: any cargo will do (rustup's if there is one).
  install_cargo=cargo
  command -v cargo >/dev/null || install_cargo=/usr/bin/cargo
  "$install_cargo" install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --root "$root/.tools" --force
fi
"$wasm_bindgen" --version
done_step

# 3. The crate for wasm32 (separate target dir, so native builds are not invalidated).
step "cargo build --release --target $TARGET"
env ${build_env[@]+"${build_env[@]}"} "${cargo_cmd[@]}" build --release --lib --target "$TARGET" -p onetoken \
  --target-dir "$target_dir" ${build_flags[@]+"${build_flags[@]}"}
wasm="$target_dir/$TARGET/release/onetoken.wasm"
done_step

# 4. JS glue + the bundled tokenizer.
step "wasm-bindgen --target web -> web/pkg"
rm -rf web/pkg
"$wasm_bindgen" --target web --out-dir web/pkg "$wasm"
assets=web/pkg/assets/qwen2.5
mkdir -p "$assets"
cp crate/tests/fixtures/qwen2.5-0.5b/{tokenizer.json,tokenizer_config.json,config.json} "$assets/"
ls -l web/pkg/onetoken_bg.wasm | awk '{ printf "   onetoken_bg.wasm: %.2f MB\n", $5 / 1e6 }'
done_step

echo "== build-wasm: total $SECONDS s"
