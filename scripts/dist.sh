#!/usr/bin/env bash
# Builds dist/: the page as one self-contained folder (HTML, scripts, styles, strings, the wasm
# engine, the bundled tokenizer, the service worker) that works from any static host or a USB
# stick served by any web server, and offline after its first visit. Model folders fetched into
# web/models/ (scripts/fetch-model.sh) are copied too with --models.
# Usage: scripts/dist.sh [OUT_DIR] [--models]   (default OUT_DIR: dist)
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist
models=false
for arg in "$@"; do
  case "$arg" in
    --models) models=true ;;
    -*) echo "usage: $0 [OUT_DIR] [--models]" >&2; exit 2 ;;
    *) out=$arg ;;
  esac
done
bash scripts/build-wasm.sh
rm -rf "$out"
mkdir -p "$out/models"
# The page's own files: what sw.js keeps for offline use, and nothing of the tests.
cp web/index.html web/style.css web/*.js "$out/"
cp -r web/i18n web/pkg "$out/"
cp web/models/README.md "$out/models/"
if $models; then
  cp -r web/models/. "$out/models/"
else
  echo '[]' >"$out/models/index.json"
fi
echo "dist: $(du -sh "$out" | cut -f1) in $out/ (serve it with any static server, e.g. node scripts/static-server.mjs $out 8080)"
