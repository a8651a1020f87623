"""Asks in the OpenAI Agents SDK (issue 24): toolgate's ask is the SDK's own `needs_approval`
interruption, approved or rejected through `RunState` with the gate's `approve`/`reject`.
A scripted `Model` stands in for the model API; the SDK runs for real.

Amounts are floats (`80.0`): the tools take a `float`, and for an `80` the SDK's parsing
changes the arguments, so the SDK interrupts for approval by itself without asking
`needs_approval`; with `80.0` the interruption is toolgate's."""

import asyncio

from agents import Agent, Runner, function_tool

from conftest import Clock, Executed, shop_tools
from test_adapter_openai_agents import ScriptedModel, fn_call, outputs, say
from toolgate.adapters.openai_agents import OpenAIAgentsGate


def setup(policy, script, **gate_options):
    ran = Executed()
    gate = OpenAIAgentsGate(policy, facts={"stage": "main"}, **gate_options)
    model = ScriptedModel(script)
    agent = Agent(name="shop", model=model, tools=gate.protect(*(function_tool(f) for f in shop_tools(ran))))
    gate.start_turn()
    return gate, agent, model, ran


def run(agent, message_or_state):
    return asyncio.run(Runner.run(agent, message_or_state))


def test_yes_runs_the_call_once_and_a_second_identical_call_asks_again(ask_policy):
    script = [[fn_call("c1", "refund", {"amount": 80.0})], [say("refunded")], [fn_call("c2", "refund", {"amount": 80.0})], [say("-")]]
    gate, agent, model, ran = setup(ask_policy, script, asks=True)
    first = run(agent, "refund 80")
    [item] = first.interruptions
    assert (item.call_id, ran.tools()) == ("c1", [])
    state = first.to_state()
    gate.approve(state, item)  # the scripted person says yes
    resumed = run(agent, state)
    assert ran.tools() == ["refund"]
    assert outputs(model.seen[1])["c1"] == "refunded 80.0"
    assert resumed.final_output == "refunded"
    again = run(agent, "refund the same again")
    assert [i.call_id for i in again.interruptions] == ["c2"]
    assert ran.tools() == ["refund"]


def test_no_keeps_the_call_from_running_and_the_model_reads_the_refusal(ask_policy):
    gate, agent, model, ran = setup(ask_policy, [[fn_call("c1", "refund", {"amount": 80.0})], [say("sorry")]], asks=True)
    first = run(agent, "refund 80")
    [item] = first.interruptions
    state = first.to_state()
    gate.reject(state, item, "no receipt")  # the scripted person says no
    run(agent, state)
    assert ran.tools() == []
    refusal = outputs(model.seen[1])["c1"]
    assert "declined" in refusal and "NOT run" in refusal and "no receipt" in refusal


def test_an_approval_that_expired_before_the_run_resumed_does_not_run_the_call(ask_policy):
    clock = Clock()
    gate, agent, model, ran = setup(ask_policy, [[fn_call("c1", "refund", {"amount": 80.0})], [say("not yet")]], asks=True, clock=clock)
    first = run(agent, "refund 80")
    [item] = first.interruptions
    state = first.to_state()
    gate.approve(state, item)
    clock.now += 2  # the policy's approvals last 1 s
    run(agent, state)
    assert ran.tools() == []
    assert outputs(model.seen[1])["c1"].startswith("Approval needed")


def test_an_approval_for_other_arguments_does_not_allow_and_asks(ask_policy):
    script = [[fn_call("c1", "refund", {"amount": 90.0})], [say("-")]]
    gate, agent, model, ran = setup(ask_policy, script, asks=True)
    ask = gate.turn().judge_one("refund", {"amount": 80.0})
    gate.turn().approve(ask["approval"])  # approved: a refund of 80, not of 90
    [item] = run(agent, "refund 90").interruptions
    assert item.call_id == "c1" and ran.tools() == []


def test_an_approval_given_before_the_call_lets_it_run_without_interrupting(ask_policy):
    gate, agent, model, ran = setup(ask_policy, [[fn_call("c1", "refund", {"amount": 80.0})], [say("done")]], asks=True)
    gate.turn().approve(gate.turn().judge_one("refund", {"amount": 80.0})["approval"])
    result = run(agent, "refund 80")
    assert result.interruptions == [] and ran.tools() == ["refund"]
    assert gate.turn().approvals == []


def test_without_asks_an_ask_is_a_denial_with_its_reason(ask_policy):
    gate, agent, model, ran = setup(ask_policy, [[fn_call("c1", "refund", {"amount": 80.0})], [say("sorry")]])
    result = run(agent, "refund 80")
    assert result.interruptions == [] and ran.tools() == []
    assert outputs(model.seen[1])["c1"].startswith("Approval needed")


def test_a_call_toolgate_allows_is_not_interrupted(ask_policy):
    gate, agent, model, ran = setup(ask_policy, [[fn_call("c1", "refund", {"amount": 20.0})], [say("done")]], asks=True)
    assert run(agent, "refund 20").interruptions == [] and ran.tools() == ["refund"]
