#!/usr/bin/env python3
"""Wall time of `toolgate hook claude-code` per event, as a coding agent pays it.

Each run spawns the release binary, pipes one PreToolUse/PostToolUse/UserPromptSubmit event
into it and waits for it to exit: process start, policy compile, state lock, read and atomic
write included. Prints p50/p90/p99 per event kind.

    cargo build --release -p toolgate && python3 bench/hook_latency.py [RUNS]
"""
import json, os, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "toolgate")
POLICY = os.path.join(ROOT, "stdlib-rules", "examples", "coding_agent.gate")
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 300

def events(session):
    yield "UserPromptSubmit", {"session_id": session, "hook_event_name": "UserPromptSubmit", "prompt": "fix the bug"}
    yield "PreToolUse", {"session_id": session, "hook_event_name": "PreToolUse", "tool_name": "Read",
                         "tool_input": {"file_path": "src/lib.rs"}, "tool_use_id": "t1"}
    yield "PostToolUse", {"session_id": session, "hook_event_name": "PostToolUse", "tool_name": "Read",
                          "tool_input": {"file_path": "src/lib.rs"}, "tool_response": {"ok": True}}
    yield "PreToolUse", {"session_id": session, "hook_event_name": "PreToolUse", "tool_name": "Edit",
                         "tool_input": {"file_path": "src/lib.rs", "old_string": "a", "new_string": "b"},
                         "tool_use_id": "t2"}

def main():
    state = tempfile.mkdtemp(prefix="toolgate-hook-bench-")
    times = {}
    for i in range(RUNS):
        for kind, event in events("bench"):
            body = json.dumps(event).encode()
            start = time.perf_counter()
            p = subprocess.run([BIN, "hook", "claude-code", "--policy", POLICY, "--state-dir", state],
                               input=body, capture_output=True)
            elapsed = (time.perf_counter() - start) * 1000
            if p.returncode != 0:
                sys.exit(f"hook failed: {p.stderr.decode()}")
            times.setdefault(kind, []).append(elapsed)
    print(f"toolgate hook claude-code, {RUNS} rounds, wall time per event in ms")
    print("| event | runs | p50 | p90 | p99 |")
    print("|---|---|---|---|---|")
    for kind, xs in times.items():
        q = statistics.quantiles(xs, n=100)
        print(f"| {kind} | {len(xs)} | {statistics.median(xs):.2f} | {q[89]:.2f} | {q[98]:.2f} |")

main()
