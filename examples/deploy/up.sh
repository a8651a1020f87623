#!/usr/bin/env bash
# Two toolgate replicas sharing turn state through one Redis, on one machine: the
# compose-style example of docs/deploy.md. Each step is the command you would run as its
# own service (a compose file, systemd units, a pod); here they are background processes.
#
#   examples/deploy/up.sh            start everything, print the addresses, wait for Ctrl-C
#   examples/deploy/up.sh --check    start everything, prove a latch set through one replica
#                                    holds on the other, stop everything (run by a test)
#
# Environment: TOOLGATE (the binary; default: build it), REDIS_PORT (6390), PORT_A (8191),
# PORT_B (8192), POLICIES (a policy directory; default: a copy of the coach example).
set -euo pipefail
cd "$(dirname "$0")/../.."
REDIS_PORT="${REDIS_PORT:-6390}"
PORT_A="${PORT_A:-8191}"
PORT_B="${PORT_B:-8192}"
if [ -z "${TOOLGATE:-}" ]; then
  cargo build -q -p toolgate
  TOOLGATE=target/debug/toolgate
fi
work=$(mktemp -d)
pids=()
down() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap down EXIT
if [ -z "${POLICIES:-}" ]; then
  POLICIES="$work/policies"
  mkdir -p "$POLICIES"
  cp stdlib-rules/examples/coach.gate "$POLICIES/"
fi

# 1. Redis: no eviction (a full store refuses writes, and toolgate then fails closed rather
#    than lose latched state), every write on disk before it is acknowledged.
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$work" \
  --appendonly yes --appendfsync always --save "" --maxmemory-policy noeviction >"$work/redis.log" 2>&1 &
pids+=($!)

# 2. Bundles: the bundle server goes here (docs/deploy.md, "Bundles").

# 3. Two replicas over the same policies and the same store. The store was started empty just
#    above, so it is declared new (`--state-new`); a later start must not say so, or a store
#    that was flushed would be taken as new too.
for port in "$PORT_A" "$PORT_B"; do
  "$TOOLGATE" serve "$POLICIES" --addr "127.0.0.1:$port" --log off \
    --state "redis://127.0.0.1:$REDIS_PORT/0" --state-new --state-timeout-ms 100 2>"$work/toolgate-$port.log" &
  pids+=($!)
done

# 4. Ready when both replicas answer /health with the store up.
for port in "$PORT_A" "$PORT_B"; do
  for i in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/health" 2>/dev/null | grep -q '"up":true' && break
    [ "$i" = 100 ] && { echo "replica on $port did not come up:" >&2; cat "$work/toolgate-$port.log" >&2; exit 1; }
    sleep 0.1
  done
done
echo "redis   127.0.0.1:$REDIS_PORT"
echo "replica http://127.0.0.1:$PORT_A"
echo "replica http://127.0.0.1:$PORT_B"

if [ "${1:-}" != "--check" ]; then
  echo "up; Ctrl-C stops everything"
  wait
  exit 0
fi

batch() { # port, turn, tool
  curl -sf -H 'Content-Type: application/json' "http://127.0.0.1:$1/v1/decide" -d "{\"policy\":\"coach\",
    \"session\":\"demo\",\"turn\":\"$2\",\"facts\":{\"stage\":\"coach\"},
    \"calls\":[{\"id\":\"c\",\"tool\":\"$3\",\"args\":{\"q\":\"x\"}}]}"
}
# Reading the docs through replica A latches the turn; a write through replica B is blocked.
batch "$PORT_A" t1 search_aws_docs | grep -q '"latched":true'
out=$(batch "$PORT_B" t1 update_memory)
echo "$out" | grep -q '"kind":"latch"' || { echo "not latched on the other replica: $out" >&2; exit 1; }
echo "check: a latch set through $PORT_A holds on $PORT_B"
