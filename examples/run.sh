#!/usr/bin/env bash
# Runs the executor examples end to end, as CI does:
#   1. `toolgate check --tools` for each example policy and its executor tool list;
#   2. the Rust agent loop (toolgate embedded): engine/examples/agent_loop.rs;
#   3. the Python and TypeScript agent loops against a real `toolgate serve` started here on a
#      free loopback port with stdlib-rules/examples.
# Each example asserts its decisions. Exits 1 if any step fails; the server is always stopped.
#
# Needs cargo, python3, and Node.js with `tsc`. When node or tsc is missing it installs them
# with apt-get (Debian's nodejs and node-typescript; as root, or with sudo). Afterwards
# everything runs offline; the only network traffic is to the server on 127.0.0.1.
set -uo pipefail
cd "$(dirname "$0")/.."

TARGET_DIR="${CARGO_TARGET_DIR:-target}"
BIN="$TARGET_DIR/debug/toolgate"
WORK="$(mktemp -d)"
SERVER_PID=""
FAILED=()

cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '\n==== %s\n' "$*"; }
run() { # run NAME CMD...: runs a step, records a failure without stopping the others
  local name="$1"
  shift
  step "$name"
  if ! "$@"; then
    echo "FAILED: $name"
    FAILED+=("$name")
  fi
}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
APT_UPDATED=""
apt_install() {
  if ! command -v apt-get >/dev/null; then
    echo "error: $* is missing and apt-get is not available; install it by hand" >&2
    return 1
  fi
  [ -n "$APT_UPDATED" ] || { as_root apt-get update -qq && APT_UPDATED=1; } || return 1
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

step "build"
cargo build -q -p toolgate --bin toolgate || exit 1
cargo build -q -p toolgate-engine --example agent_loop || exit 1

for name in motor_claims coach messenger_payments; do
  run "check --tools $name" "$BIN" check --tools "examples/tools/$name.tools.json" \
    "stdlib-rules/examples/$name.gate"
done

run "rust: engine/examples/agent_loop.rs" "$TARGET_DIR/debug/examples/agent_loop"

step "serve stdlib-rules/examples"
"$BIN" serve stdlib-rules/examples --addr 127.0.0.1:0 --log off --poll-ms 0 \
  2>"$WORK/server.log" &
SERVER_PID=$!
ADDR=""
for _ in $(seq 1 100); do # the server prints its address once it listens (port 0: any free one)
  ADDR="$(sed -n 's|^toolgate: listening on http://||p' "$WORK/server.log")"
  [ -n "$ADDR" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$ADDR" ]; then
  echo "error: the server did not start:" >&2
  cat "$WORK/server.log" >&2
  exit 1
fi
export TOOLGATE_URL="http://$ADDR"
python3 - "$TOOLGATE_URL/health" <<'EOF' || { echo "error: /health never answered 200" >&2; exit 1; }
import sys, time, urllib.request
for _ in range(100):
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.1)
sys.exit(1)
EOF
echo "listening on $TOOLGATE_URL"

run "python: examples/python/agent_loop.py" python3 examples/python/agent_loop.py

typescript() {
  command -v node >/dev/null || apt_install nodejs || return 1
  command -v tsc >/dev/null || apt_install node-typescript || return 1
  tsc -p examples/typescript && node examples/typescript/build/agent_loop.js
}
run "typescript: examples/typescript/agent_loop.ts" typescript

echo
if [ ${#FAILED[@]} -eq 0 ]; then
  echo "examples/run.sh: every example ran and matched its expected decisions"
else
  echo "examples/run.sh: ${#FAILED[@]} step(s) failed: ${FAILED[*]}"
  exit 1
fi
