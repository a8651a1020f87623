#!/usr/bin/env bash
# Load test of `toolgate serve` on loopback: a 4-call batch against coach.gate.
# Installs wrk from Debian's packages if missing, builds the release binary, starts the
# server on 127.0.0.1, runs wrk for DURATION seconds, prints requests/s and latency
# percentiles, and stops the server. The client shares the machine's cores with the server.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-10}"
THREADS="${THREADS:-1}"
CONNECTIONS="${CONNECTIONS:-16}"
PORT="${PORT:-18281}"

if ! command -v wrk >/dev/null; then
  apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
fi
cargo build -q --release -p toolgate

dir=$(mktemp -d)
cp stdlib-rules/examples/coach.gate "$dir/"
./target/release/toolgate serve "$dir" --addr "127.0.0.1:$PORT" --log off --poll-ms 0 2>"$dir/server.err" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break; sleep 0.1; done

cat > "$dir/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[{"facts":{"stage":"coach","latched":false},"calls":[
 {"id":"c1","tool":"grade_attempt","args":{"attempt":"a-1","score":1}},
 {"id":"c2","tool":"search_aws_docs","args":{"q":"lambda limits"}},
 {"id":"c3","tool":"fetch_vendor_doc","args":{"url":"https://docs.aws.amazon.com/lambda/"}},
 {"id":"c4","tool":"get_learner_state","args":{}}]}]]
LUA

echo "wrk: ${THREADS} thread(s), ${CONNECTIONS} connections, ${DURATION}s, 4-call batch, coach.gate"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$dir/post.lua" "http://127.0.0.1:$PORT/v1/decide"
