#!/usr/bin/env bash
# toolgate's decision server against a bare axum 0.8 server (bench/bare-server) that reads the
# same body and answers a fixed response of the same size, in one run, on loopback:
#   1. toolgate, decision log off      2. toolgate, decision log on (to a file)
#   3. the bare server
# Prints requests/s and p99 for each and the ratios issue 12 sets targets for (log off at
# least 0.8x the bare server, log on at least 0.7x, p99 under 1 ms). The client (wrk, one
# thread, 16 connections) shares the machine's cores with the server, as in bench/load.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-10}"
CONNECTIONS="${CONNECTIONS:-16}"
PORT="${PORT:-18291}"
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 2; }
cargo build -q --release -p toolgate
(cd bench/bare-server && cargo build -q --release)

dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
cp stdlib-rules/examples/coach.gate "$dir/"
body='{"facts":{"stage":"coach","latched":false},"calls":[
 {"id":"c1","tool":"grade_attempt","args":{"attempt":"a-1","score":1}},
 {"id":"c2","tool":"search_aws_docs","args":{"q":"lambda limits"}},
 {"id":"c3","tool":"fetch_vendor_doc","args":{"url":"https://docs.aws.amazon.com/lambda/"}},
 {"id":"c4","tool":"get_learner_state","args":{}}]}'
printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = [[%s]]\n' "$body" > "$dir/post.lua"

wait_up() { for _ in $(seq 100); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done; echo "server did not start" >&2; exit 1; }
# "RPS P99_MS" from wrk's output.
measure() {
  local out; out=$(wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$dir/post.lua" "$1")
  local rps p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 } print v }' <<<"$out")
  echo "$rps $p99"
}

run_toolgate() { # $1: extra flags
  ./target/release/toolgate serve "$dir" --addr "127.0.0.1:$PORT" --poll-ms 0 $1 2>>"$dir/server.err" &
  pids+=($!)
  wait_up "http://127.0.0.1:$PORT/health"
}

run_toolgate "--log off"
curl -sf -H 'Content-Type: application/json' --data "$body" "http://127.0.0.1:$PORT/v1/decide" > "$dir/response.json"
read -r off_rps off_p99 < <(measure "http://127.0.0.1:$PORT/v1/decide")
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true

run_toolgate "--log all --log-file $dir/decisions.log"
read -r on_rps on_p99 < <(measure "http://127.0.0.1:$PORT/v1/decide")
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true

bench/bare-server/target/release/bare-server "127.0.0.1:$PORT" "$dir/response.json" &
pids+=($!)
for _ in $(seq 100); do curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' --data '{}' "http://127.0.0.1:$PORT/v1/decide" && break; sleep 0.1; done
read -r bare_rps bare_p99 < <(measure "http://127.0.0.1:$PORT/v1/decide")

echo "response: $(wc -c < "$dir/response.json") bytes; wrk 1 thread, $CONNECTIONS connections, ${DURATION}s each"
printf '%-26s %10s req/s  p99 %6s ms\n' "bare axum 0.8" "$bare_rps" "$bare_p99" \
  "toolgate, log off" "$off_rps" "$off_p99" "toolgate, log on (file)" "$on_rps" "$on_p99"
awk -v b="$bare_rps" -v off="$off_rps" -v on="$on_rps" 'BEGIN {
  printf "ratio log off: %.2fx (target 0.8x)\nratio log on:  %.2fx (target 0.7x)\n", off / b, on / b }'
