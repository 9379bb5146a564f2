#!/usr/bin/env bash
# Downloads the official Qwen2.5 Instruct files into web/models/<name>/ so the page can load them
# offline (a classroom: copy the web/ folder, models included, to every machine or a USB stick).
# Usage: scripts/fetch-model.sh [0.5b|1.5b]   (default 0.5b; needs internet: huggingface.co)
set -euo pipefail
cd "$(dirname "$0")/.."
size="${1:-0.5b}"
case "$size" in
  0.5b) repo=Qwen/Qwen2.5-0.5B-Instruct ;;
  1.5b) repo=Qwen/Qwen2.5-1.5B-Instruct ;;
  *) echo "usage: $0 [0.5b|1.5b]" >&2; exit 2 ;;
esac
name="qwen2.5-$size-instruct"
dir="web/models/$name"
mkdir -p "$dir"
base="https://huggingface.co/$repo/resolve/main"
for f in config.json generation_config.json tokenizer.json tokenizer_config.json model.safetensors; do
  echo "fetching $repo/$f"
  # -C -: resume an interrupted download.
  curl -fL --retry 3 -C - -o "$dir/$f" "$base/$f"
done
# The page lists bundled folders from models/index.json (a static host cannot list folders).
python3 - "$name" <<'PY'
import json, os, sys
path = "web/models/index.json"
names = json.load(open(path)) if os.path.exists(path) else []
if sys.argv[1] not in names:
    names.append(sys.argv[1])
json.dump(sorted(names), open(path, "w"))
PY
echo "done: $dir (listed in web/models/index.json)"
