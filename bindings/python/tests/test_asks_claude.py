"""Asks in the Claude Agent SDK (issue 24): toolgate's ask is the `PreToolUse` hook's
`permissionDecision: "ask"`, which the CLI turns into the SDK's `can_use_tool` permission
request; the gate's `can_use_tool` asks the scripted person and answers allow or deny. The
scripted `Transport` plays the CLI's side of the control protocol; the SDK runs for real."""

import asyncio

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

from conftest import Clock
from test_adapter_claude import ScriptedCLI, pre_tool_use
from toolgate.adapters.claude import ClaudeGate


class Person:
    """A scripted approver: answers in turn from `answers`, noting what it was asked."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []

    async def __call__(self, ask):
        self.asked.append(ask)
        return self.answers.pop(0)


async def permission(cli, tool, tool_use_id, reason=None, **args):
    """The CLI's `can_use_tool` request, as it sends one after a hook answered "ask"."""
    request_id = f"cli_{next(cli.ids)}"
    cli.answers[request_id] = asyncio.get_running_loop().create_future()
    request = {"subtype": "can_use_tool", "tool_name": tool, "input": args, "tool_use_id": tool_use_id, "permission_suggestions": None}
    if reason is not None:
        request["decision_reason"] = reason
    await cli.inbox.put({"type": "control_request", "request_id": request_id, "request": request})
    answer = await asyncio.wait_for(cli.answers[request_id], 10)
    assert answer["subtype"] == "success", answer
    return answer["response"]


def session(policy, script, approver=None, clock=None):
    gate = ClaudeGate(policy, facts={"stage": "main"}, approver=approver, **({} if clock is None else {"clock": clock}))
    options = ClaudeAgentOptions(hooks=gate.hooks(), can_use_tool=gate.can_use_tool if approver else None)

    async def go():
        cli = ScriptedCLI()
        async with ClaudeSDKClient(options=options, transport=cli):
            return await script(cli, gate)

    return asyncio.run(go())


async def ask_then_permission(cli, tool_use_id, amount):
    hook = (await pre_tool_use(cli, "refund", tool_use_id, amount=amount))["hookSpecificOutput"]
    assert hook["permissionDecision"] == "ask", hook
    return hook, await permission(cli, "refund", tool_use_id, hook["permissionDecisionReason"], amount=amount)


def test_yes_allows_the_call_once_and_a_second_identical_call_asks_again(ask_policy):
    person = Person(True)

    async def script(cli, gate):
        await cli.fire("UserPromptSubmit", prompt="refund 80")
        hook, allowed = await ask_then_permission(cli, "t1", 80)
        again = (await pre_tool_use(cli, "refund", "t2", amount=80))["hookSpecificOutput"]
        return hook, allowed, again

    hook, allowed, again = session(ask_policy, script, approver=person)
    assert hook["permissionDecisionReason"].startswith("Approval needed")
    assert allowed["behavior"] == "allow" and allowed["updatedInput"] == {"amount": 80}
    assert again["permissionDecision"] == "ask"
    [asked] = person.asked
    assert (asked["tool"], asked["args"], asked["rule"]) == ("refund", {"amount": 80}, "refunds")


def test_no_denies_the_call_with_the_refusal_for_claude(ask_policy):
    async def script(cli, gate):
        await cli.fire("UserPromptSubmit", prompt="refund 80")
        _, denied = await ask_then_permission(cli, "t1", 80)
        again = (await pre_tool_use(cli, "refund", "t2", amount=80))["hookSpecificOutput"]
        return denied, again

    denied, again = session(ask_policy, script, approver=Person("no receipt"))
    assert denied["behavior"] == "deny"
    assert "declined" in denied["message"] and "NOT run" in denied["message"] and "no receipt" in denied["message"]
    # Declined in this turn: refused without asking the person again.
    assert again["permissionDecision"] == "deny" and "declined" in again["permissionDecisionReason"]


def test_an_expired_approval_asks_again(ask_policy):
    clock = Clock()

    async def script(cli, gate):
        await cli.fire("UserPromptSubmit", prompt="refund 80")
        first = (await pre_tool_use(cli, "refund", "t1", amount=80))["hookSpecificOutput"]
        turn = gate.turn("s1")
        digest = turn.preview("refund", {"amount": 80})["approval"]
        turn.approve(digest)
        clock.now += 2  # the policy's approvals last 1 s
        later = (await pre_tool_use(cli, "refund", "t2", amount=80))["hookSpecificOutput"]
        return first, later

    first, later = session(ask_policy, script, approver=Person(), clock=clock)
    assert first["permissionDecision"] == later["permissionDecision"] == "ask"


def test_an_approval_for_other_arguments_does_not_allow(ask_policy):
    async def script(cli, gate):
        await cli.fire("UserPromptSubmit", prompt="refund 80")
        turn = gate.turn("s1")
        turn.approve(turn.preview("refund", {"amount": 80})["approval"])
        other = (await pre_tool_use(cli, "refund", "t1", amount=90))["hookSpecificOutput"]
        same = await pre_tool_use(cli, "refund", "t2", amount=80)
        return other, same

    other, same = session(ask_policy, script, approver=Person())
    assert other["permissionDecision"] == "ask"
    assert same == {}, "the approved call gets no objection"


def test_without_an_approver_an_ask_is_a_denial_with_its_reason(ask_policy):
    async def script(cli, gate):
        await cli.fire("UserPromptSubmit", prompt="refund 80")
        return (await pre_tool_use(cli, "refund", "t1", amount=80))["hookSpecificOutput"]

    out = session(ask_policy, script)
    assert out["permissionDecision"] == "deny" and out["permissionDecisionReason"].startswith("Approval needed")
