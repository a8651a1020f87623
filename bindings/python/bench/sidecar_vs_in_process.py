"""A batch of 4 judged in process (from a dict) against the same batch sent to the sidecar.

    python bindings/python/bench/sidecar_vs_in_process.py --toolgate target/release/toolgate

Prints the median time per batch of each path and their ratio. A measurement to read and
report, not a test: nothing here passes or fails on a timing.

- in process: `Policy.decide(dict)`, `Policy.decide(str)`, `Policy.decide(bytes)`;
- sidecar: `toolgate serve` on loopback (decision log off), the batch POSTed to `/v1/decide`
  with `json.dumps` over one kept-alive `http.client` connection (the sidecar's best case),
  and with `urllib.request` (a new connection per batch, what the docs' snippet does).
"""

import argparse
import http.client
import os
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import urllib.request
from pathlib import Path

import toolgate

REPO = Path(__file__).resolve().parents[3]
GATE = REPO / "stdlib-rules" / "examples" / "coach.gate"
BATCH = json.loads((REPO / "stdlib-rules" / "examples" / "coach.request.json").read_text())


def per_call_us(fn, number, repeat=7, timer=time.perf_counter):
    """Median over `repeat` runs of `number` calls, in microseconds per call."""
    runs = timeit.repeat(fn, number=number, repeat=repeat, timer=timer)
    return statistics.median(runs) / number * 1e6


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_sidecar(binary, port):
    policies = Path(tempfile.mkdtemp(prefix="toolgate-bench-"))
    (policies / GATE.name).write_text(GATE.read_text())
    proc = subprocess.Popen(
        [binary, "serve", str(policies), "--addr", f"127.0.0.1:{port}", "--log", "off"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("the sidecar did not start listening within 30 s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toolgate", default=str(REPO / "target" / "release" / "toolgate"))
    parser.add_argument("--number", type=int, default=100_000, help="in-process calls per run")
    parser.add_argument("--requests", type=int, default=2_000, help="sidecar requests per run")
    args = parser.parse_args()

    policy = toolgate.load(GATE)
    text = json.dumps(BATCH)
    raw = text.encode()
    expected = policy.decide(BATCH)
    assert len(BATCH["calls"]) == 4

    in_dict = per_call_us(lambda: policy.decide(BATCH), args.number)
    in_str = per_call_us(lambda: policy.decide(text), args.number)
    in_bytes = per_call_us(lambda: policy.decide(raw), args.number)
    dumps_only = per_call_us(lambda: json.dumps(BATCH), args.number)
    # CPU time of this process alone: steadier than wall time on a shared machine.
    cpu_dict = per_call_us(lambda: policy.decide(BATCH), args.number, timer=time.process_time)
    cpu_str = per_call_us(lambda: policy.decide(text), args.number, timer=time.process_time)

    port = free_port()
    proc = start_sidecar(args.toolgate, port)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port)
        headers = {"Content-Type": "application/json"}

        def keep_alive():
            conn.request("POST", "/v1/decide", body=json.dumps(BATCH), headers=headers)
            return json.loads(conn.getresponse().read())

        def new_connection():
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/decide", data=json.dumps(BATCH).encode(), headers=headers)
            with urllib.request.urlopen(req) as r:
                return json.load(r)

        answer = keep_alive()
        for key in ("policy", "revision", "latched", "decisions"):
            assert answer[key] == expected[key], f"sidecar and in-process disagree on {key}"
        for _ in range(200):
            keep_alive()
        sidecar_kept = per_call_us(keep_alive, args.requests)
        sidecar_new = per_call_us(new_connection, max(args.requests // 4, 100))
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    rows = [
        ("in process, decide(dict)", in_dict),
        ("in process, decide(str)", in_str),
        ("in process, decide(bytes)", in_bytes),
        ("in process, decide(dict), CPU time", cpu_dict),
        ("in process, decide(str), CPU time", cpu_str),
        ("json.dumps(batch) alone, for scale", dumps_only),
        ("sidecar, kept-alive http.client", sidecar_kept),
        ("sidecar, urllib.request (new connection)", sidecar_new),
    ]
    load = os.getloadavg()[0]
    print(f"batch of {len(BATCH['calls'])} calls ({GATE.name}), median per batch, Python {sys.version.split()[0]}, load {load:.1f}")
    for name, us in rows:
        print(f"  {name:44} {us:9.2f} us")
    print(f"  sidecar (kept-alive) / in process (dict): {sidecar_kept / in_dict:8.1f}x")
    print(f"  sidecar (new connection) / in process (dict): {sidecar_new / in_dict:4.1f}x")


if __name__ == "__main__":
    main()
