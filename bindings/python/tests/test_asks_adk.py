"""Asks in Google ADK (issue 24): with `asks=True` the gate's `before_tool_callback` calls
`ToolContext.request_confirmation`, ADK pauses with its `adk_request_confirmation` call, and
the person's `ToolConfirmation` (a function response) re-runs the call through the callback.
A scripted `BaseLlm` stands in for the model API; ADK's runner runs for real."""

import asyncio

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import InMemoryRunner
from google.genai import types

from conftest import Executed, shop_tools
from test_adapter_adk import ScriptedLlm, calls, responses, text
from toolgate.adapters.adk import AdkGate


def run(policy, script, answers, asks=True):
    """Runs "refund please", then answers each confirmation request with the next of
    `answers` (True: yes, False: no). Returns what ran, the model and the requests seen."""
    ran = Executed()
    gate = AdkGate(policy, facts={"stage": "main"}, asks=asks)
    model = ScriptedLlm(model="scripted", script=list(script), seen=[])
    agent = LlmAgent(name="shop", model=model, tools=shop_tools(ran), before_tool_callback=gate.before_tool_callback, after_tool_callback=gate.after_tool_callback)
    runner = InMemoryRunner(app=App(name="shop", root_agent=agent))
    requests = []

    async def go():
        session = await runner.session_service.create_session(app_name="shop", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="refund please")])
        answers_left = list(answers)
        while message is not None:
            pending = []
            async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
                for fc in event.get_function_calls():
                    if fc.name == "adk_request_confirmation":
                        pending.append(fc)
            requests.extend(pending)
            message = None
            if pending and answers_left:
                yes = answers_left.pop(0)
                message = types.Content(
                    role="user",
                    parts=[types.Part(function_response=types.FunctionResponse(id=fc.id, name="adk_request_confirmation", response={"confirmed": yes})) for fc in pending],
                )

    asyncio.run(go())
    return ran, model, requests


def test_yes_runs_the_call_once_and_a_second_identical_call_asks_again(ask_policy):
    script = [calls(("c1", "refund", {"amount": 80})), calls(("c2", "refund", {"amount": 80})), text("-")]
    ran, model, requests = run(ask_policy, script, [True])
    assert ran.tools() == ["refund"]
    assert len(requests) == 2, "the second identical call asked again"
    assert requests[0].args["toolConfirmation"]["hint"].startswith("Approval needed")


def test_no_keeps_the_call_from_running_and_the_model_reads_the_refusal(ask_policy):
    script = [calls(("c1", "refund", {"amount": 80})), text("sorry")]
    ran, model, requests = run(ask_policy, script, [False])
    assert ran.tools() == []
    refusal = responses(model.seen[-1])["c1"]
    assert "declined" in refusal["error"] and "NOT run" in refusal["error"]


def test_without_asks_an_ask_is_a_denial_with_its_reason(ask_policy):
    ran, model, requests = run(ask_policy, [calls(("c1", "refund", {"amount": 80})), text("sorry")], [], asks=False)
    assert ran.tools() == [] and requests == []
    assert responses(model.seen[-1])["c1"]["error"].startswith("Approval needed")
