#!/usr/bin/env bash
# Instructions per document for each decision path, from callgrind (stable on a loaded
# machine). Usage: bash bench/callgrind.sh [BATCH]   (default 4)
set -euo pipefail
cd "$(dirname "$0")"
batch="${1:-4}"
cargo build -q --release --bin instructions
iters=200
for mode in floor into decide json value; do
  out=$(mktemp)
  docs=$(valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no \
    --toggle-collect='*run_measured*' target/release/instructions "$mode" "$batch" "$iters" 2>/dev/null \
    | awk '{print $1}')
  total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  rm -f "$out"
  echo "$mode batch=$batch instructions/document=$((total / iters / docs))"
done
