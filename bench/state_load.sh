#!/usr/bin/env bash
# What shared turn state costs (docs/deploy.md, "Figures"): wrk against `toolgate serve` on
# loopback with every batch in a session and turn (a 2-call batch of coach.gate, turns
# cycling so most batches continue a held turn), three ways:
#   1. one server, turn state in memory;
#   2. one server, turn state in a local redis-server (--state);
#   3. two replicas sharing that redis-server, one wrk per replica at once (throughput summed);
#   4. one server, turn state in a local three-shard Redis Cluster (--state redis+cluster://);
#   5. one server on a store of its own, coach.gate with a budget per session on grade_attempt
#      (its count rides in the same script): the script calls per batch, with and without it.
# Each runs once with 1 connection (latency per batch, the added cost of the round trip) and
# once with CONNECTIONS connections (throughput). Needs wrk and redis-server (Debian's
# packages); builds the release binary. The client, the servers and Redis share the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-10}"
CONNECTIONS="${CONNECTIONS:-16}"
BASE="${PORT:-18381}"

for tool in wrk redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install wrk redis-server)" >&2; exit 2; }
done
[ -x target/release/toolgate ] || cargo build -q --release -p toolgate
bin=target/release/toolgate

dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
cp stdlib-rules/examples/coach.gate "$dir/"
budget_dir="$dir/budgeted"
mkdir "$budget_dir"
{ cat stdlib-rules/examples/coach.gate
  echo 'budget grades for grade_attempt { count <= 1000000000 per session }'; } >"$budget_dir/coach.gate"

redis_port=$((BASE + 9))
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --maxmemory-policy noeviction >/dev/null &
pids+=($!)

# Three cluster nodes, no replicas, the slots split evenly by redis-cli.
shards=($((BASE + 10)) $((BASE + 11)) $((BASE + 12)))
for p in "${shards[@]}"; do
  mkdir -p "$dir/node-$p"
  redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --maxmemory-policy noeviction \
    --cluster-enabled yes --cluster-config-file "$dir/node-$p/nodes.conf" --dir "$dir/node-$p" >/dev/null &
  pids+=($!)
done
for p in "${shards[@]}"; do
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create "${shards[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >/dev/null
for p in "${shards[@]}"; do
  for _ in $(seq 100); do redis-cli -p "$p" cluster info | grep -q cluster_state:ok && break; sleep 0.1; done
done
budget_redis=$((BASE + 13))
redis-server --port "$budget_redis" --bind 127.0.0.1 --save "" --appendonly no \
  --maxmemory-policy noeviction >/dev/null &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$budget_redis" ping >/dev/null 2>&1 && break; sleep 0.1; done
cluster_url="redis+cluster://127.0.0.1:${shards[0]},127.0.0.1:${shards[1]},127.0.0.1:${shards[2]}"

wait_up() { for _ in $(seq 100); do curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return; sleep 0.1; done; echo "no server on $1" >&2; exit 1; }
serve() { # port, extra flags...
  local port=$1; shift
  serve_dir "$dir" "$port" "$@"
}
serve_dir() { # directory, port, extra flags...
  local from=$1 port=$2; shift 2
  "$bin" serve "$from" --addr "127.0.0.1:$port" --log off --poll-ms 0 "$@" 2>>"$dir/server.err" &
  pids+=($!)
  wait_up "$port"
}

cat > "$dir/post.lua" <<'LUA'
-- Sessions cycle over 4096 per wrk process, each with 8 turns in turn, so batches both
-- continue held turns and start new ones (pushing old ones out).
local n, prefix = 0, nil
function init(args) math.randomseed(os.time() + os.clock() * 1e6); prefix = tostring(math.random(1, 1e9)) end
function request()
  n = n + 1
  local body = string.format([[{"session":"s%s-%d","turn":"t%d","facts":{"stage":"coach"},"calls":[
 {"id":"c1","tool":"grade_attempt","args":{"attempt":"a-1","score":1}},
 {"id":"c2","tool":"get_learner_state","args":{}}]}]], prefix, n % 4096, math.floor(n / 4096) % 8)
  return wrk.format("POST", "/v1/decide", {["Content-Type"] = "application/json"}, body)
end
LUA

run() { # label, connections, ports...
  local label=$1 conns=$2; shift 2
  local outs=()
  for port in "$@"; do
    wrk -t1 -c"$conns" -d"${DURATION}s" --latency -s "$dir/post.lua" "http://127.0.0.1:$port/v1/decide" >"$dir/wrk.$port" &
    outs+=($!)
  done
  wait "${outs[@]}"
  local total=0
  for port in "$@"; do
    total=$(awk -v t="$total" '/^Requests\/sec/ { print t + $2 }' "$dir/wrk.$port")
  done
  local lat
  lat=$(awk '/ 50%/ { p50 = $2 } / 99%/ { p99 = $2 } END { print "p50 " p50 ", p99 " p99 }' "$dir/wrk.$1")
  printf '%-34s %3s conn(s)  %9.0f req/s   %s\n' "$label" "$conns" "$total" "$lat"
}

serve $((BASE + 0))
serve $((BASE + 1)) --state "redis://127.0.0.1:$redis_port" --state-new --state-timeout-ms 1000
serve $((BASE + 2)) --state "redis://127.0.0.1:$redis_port" --state-timeout-ms 1000
serve $((BASE + 3)) --state "$cluster_url" --state-new --state-timeout-ms 1000
serve_dir "$budget_dir" $((BASE + 4)) --state "redis://127.0.0.1:$budget_redis" --state-new --state-timeout-ms 1000

echo "wrk ${DURATION}s per row; 2-call batch of coach.gate in a session and turn; $(nproc) cores"
run "in memory, 1 server" 1 $((BASE + 0))
run "redis, 1 server" 1 $((BASE + 1))
run "in memory, 1 server" "$CONNECTIONS" $((BASE + 0))
run "redis, 1 server" "$CONNECTIONS" $((BASE + 1))
run "redis, 2 replicas (summed)" "$CONNECTIONS" $((BASE + 1)) $((BASE + 2))
run "redis cluster (3 shards), 1 server" 1 $((BASE + 3))
run "redis cluster (3 shards), 1 server" "$CONNECTIONS" $((BASE + 3))
echo "redis round trips: $(curl -s "http://127.0.0.1:$((BASE + 1))/metrics" | awk '/^toolgate_state_seconds_(sum|count)/ { v[$1] = $2 } END { if (v["toolgate_state_seconds_count"] > 0) printf "%d, mean %.0f us", v["toolgate_state_seconds_count"], 1e6 * v["toolgate_state_seconds_sum"] / v["toolgate_state_seconds_count"] }')"
echo "state errors: $(curl -s "http://127.0.0.1:$((BASE + 1))/metrics" | awk '/^toolgate_state_errors_total/ { print $2 }')"
key=$(redis-cli -p "$redis_port" --scan --pattern 'toolgate:s:*' | head -1 || true)
used=$(redis-cli -p "$redis_port" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }')
keys=$(redis-cli -p "$redis_port" dbsize)
echo "redis: $keys keys, used_memory $used bytes ($((used / keys)) per key, baseline included); one session hash: $(redis-cli -p "$redis_port" memory usage "$key") bytes"
evalsha() { redis-cli -p "$1" info commandstats | awk -F'[:,=]' '/^cmdstat_evalsha/ { print $3 " calls, " $7 " us per call" }'; }
echo "redis-side cost of the script: $(evalsha "$redis_port")"
for p in "${shards[@]}"; do echo "cluster shard $p: $(redis-cli -p "$p" dbsize) keys; script $(evalsha "$p")"; done

# A budget adds no round trip: script calls (EVALSHA + EVAL) per batch, from INFO
# commandstats before and after a run, on the plain server's store and on the budgeted one's.
scripts() { redis-cli -p "$1" info commandstats | awk -F'[:,=]' '/^cmdstat_eval(sha)?:/ { n += $3 } END { print n + 0 }'; }
requests() { awk '/requests in/ { print $1 }' "$dir/wrk.$1"; }
for row in "without a budget:$((BASE + 1)):$redis_port" "with a budget per session:$((BASE + 4)):$budget_redis"; do
  IFS=: read -r label port store <<<"$row"
  before=$(scripts "$store")
  run "redis, 1 server, $label" 1 "$port" >/dev/null
  after=$(scripts "$store")
  awk -v l="$label" -v d="$((after - before))" -v r="$(requests "$port")" \
    'BEGIN { printf "script calls per batch, %s: %.3f (%d calls, %d batches)\n", l, d / r, d, r }'
done
