#!/usr/bin/env python3
"""What the turn-state batch script costs Redis (docs/deploy.md, "Figures"), without toolgate:
the script of this tree, or of an older revision (`--rev REV`, read with `git show`), run by
EVALSHA against a fresh local redis-server on bench/state_load.sh's workload (4096 sessions,
8 turns each in turn, a latch set by every batch), pipelined 256 at a time. Prints Redis's
own `usec_per_call` (INFO commandstats, wall time inside Redis) and its CPU time per call.

  python3 bench/state_script.py                # this tree
  python3 bench/state_script.py --rev 62243fe  # the hash-and-cjson script of before
  REPEAT=4 python3 bench/state_script.py       # each turn 4 batches in a row (carried)

Needs redis-server and Python's redis package (pip install redis)."""
import argparse, os, subprocess, sys, time

import redis

DIR = "server/src/turn_state/"
# Where the scripts were before the server became its own crate, for --rev of an older tree.
OLD_DIR = "cli/src/server/turn_state/"
ap = argparse.ArgumentParser()
ap.add_argument("--rev", help="a git revision whose script to run instead of this tree's")
ap.add_argument("--port", type=int, default=19601)
ap.add_argument("--calls", type=int, default=100_000)
args = ap.parse_args()
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def read(name):
    if args.rev:
        for d in (DIR, OLD_DIR):
            out = subprocess.run(["git", "show", f"{args.rev}:{d}{name}"], capture_output=True)
            if out.returncode == 0:
                return out.stdout.decode()
        return None
    return open(DIR + name).read() if os.path.exists(DIR + name) else None


session = read("session.lua")
if session is None:  # the layout before session.lua: common.lua, then exchange.lua
    script = read("common.lua") + "\n" + read("exchange.lua")
else:
    # As server/src/turn_state/redis_store.rs assembles it; budget.lua (when the tree has it)
    # reads its arguments from ARGV[11] on, which this workload leaves out (no budget).
    budget = read("budget.lua")
    parts = [read("common.lua"), session] + (["local B = 11", budget] if budget else []) + [read("exchange.lua")]
    script = "local writes = true\n" + "\n".join(parts)
repeat = int(os.environ.get("REPEAT", "1"))
server = subprocess.Popen(
    ["redis-server", "--port", str(args.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    stdout=subprocess.DEVNULL,
)
try:
    r = redis.Redis(port=args.port, decode_responses=True)
    for _ in range(100):
        try:
            r.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    sha = r.script_load(script)

    def batch(i):
        s, t = i % 4096, (i // (4096 * repeat)) % 8
        key = "toolgate:s:{coach:s%d}" % s
        # One marker key per slot in this tree, one for the store before: either way the
        # script is handed its key.
        marker = "toolgate:m:{%d}" % (s % 977) if session else "toolgate:marker"
        return (sha, 3, key, key + ":old", marker, "t%d" % t, 1_800_000, 90_000_000,
                "e1", "e1", 0, "new", "graded", 4, 4096)

    def run(first, count):
        pipe = r.pipeline(transaction=False)
        for i in range(first, first + count):
            pipe.evalsha(*batch(i))
            if i % 256 == 255:
                pipe.execute()
        pipe.execute()

    run(0, 4096 * 8 * repeat)  # every session and turn written once before measuring
    r.config_resetstat()
    before = r.info("cpu")
    run(4096 * 8 * repeat, args.calls)
    after = r.info("cpu")
    stats = r.info("commandstats")["cmdstat_evalsha"]
    cpu = sum(after[k] - before[k] for k in ("used_cpu_user", "used_cpu_sys")) / stats["calls"] * 1e6
    print(f"{args.rev or 'this tree'}: {stats['calls']} calls, {stats['usec_per_call']:.1f} us per call "
          f"(commandstats), {cpu:.1f} us of Redis CPU per call")
finally:
    server.terminate()
    server.wait()
