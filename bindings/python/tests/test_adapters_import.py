"""The adapters import no framework until used: `toolgate` works with none installed."""

import subprocess
import sys

BLOCK = """
import sys
for name in ("langchain", "langchain_core", "langgraph", "agents", "claude_agent_sdk", "google.adk", "google"):
    sys.modules[name] = None          # any import of these now raises ImportError
import toolgate
import toolgate.adapters
from toolgate.adapters import adk, claude, langchain, openai_agents, turn
policy = toolgate.compile("module m\\nwrite w\\ningest i\\nstage s { tools [w, i] }\\nlatch l { set_by ingest blocks write }\\n")
t = turn.Gate(policy, facts={"stage": "s"}).turn()
assert t.judge_one("i", {})["allow"] and not t.judge_one("w", {})["allow"]
print("ok")
"""


def test_importing_the_adapters_needs_no_framework():
    done = subprocess.run([sys.executable, "-c", BLOCK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
