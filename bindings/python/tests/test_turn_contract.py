"""The turn-state contract (`turns/contract/scenarios.json`, issue 20) run against
`toolgate.TurnState`, the same scenarios `toolgate hook` and `/v1/hooks` run in
`cli/tests/turn_contract.rs`.

`TurnState` reads an unseen turn id as a new turn (`start_turn`). It lives in the executor's
process, so its state is lost only with the executor: scenarios that need `lose` are skipped.
A policy that no longer declares a latch set in the turn raises `TurnError`, which the
adapters answer as a denial.
"""

import json

import pytest

import toolgate
from conftest import REPO

CONTRACT = json.loads((REPO / "turns" / "contract" / "scenarios.json").read_text())
POLICIES = {
    name: toolgate.compile(text, "contract.gate") for name, text in CONTRACT["policies"].items()
}
SKIPPED = {"lose"}


def expected(step):
    want = step["expect"]
    return want if isinstance(want, str) else want["start_turn"]


@pytest.mark.parametrize("scenario", CONTRACT["scenarios"], ids=lambda s: s["name"])
def test_turn_state_keeps_the_contract(scenario):
    missing = SKIPPED.intersection(scenario.get("needs", []))
    if missing:
        pytest.skip(f"TurnState cannot {', '.join(sorted(missing))}")
    state = toolgate.TurnState()
    policy = POLICIES[CONTRACT["policy"]]
    for i, step in enumerate(scenario["steps"]):
        at = f"step {i} {step}"
        if "signal" in step:
            state.signal(policy, step["signal"])
        elif "call" in step:
            request = {"facts": {"stage": "main"}, "calls": [{"id": f"u{i}", "tool": step["call"], "args": {}}]}
            try:
                [decision] = state.judge(policy, request, step["turn"])["decisions"]
                got = "allow" if decision["allow"] else "deny"
            except toolgate.TurnError:
                got = "deny"
            assert got == expected(step), at
        elif "post" in step:
            state.record_call(step["post"], True, step["turn"])
        elif "policy" in step:
            policy = POLICIES[step["policy"]]
        else:
            pytest.fail(f"unknown step {at}")


def test_the_contract_skips_only_what_a_process_cannot_lose():
    skipped = [s["name"] for s in CONTRACT["scenarios"] if SKIPPED.intersection(s.get("needs", []))]
    assert skipped == ["lost_state_keeps_every_turn_latched_until_the_next_signal"]
