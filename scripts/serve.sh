#!/usr/bin/env bash
# Builds the wasm package and serves the page (web/) on http://127.0.0.1:$PORT/ (default 8080).
# The page runs on the bundled tokenizer; nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-wasm.sh
command -v node >/dev/null || { echo "error: serving needs Node.js >= 18 (apt-get install nodejs)" >&2; exit 1; }
exec node scripts/static-server.mjs web "${PORT:-8080}"
