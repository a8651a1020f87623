"""Claude Agent SDK: toolgate's hooks registered through `ClaudeAgentOptions`, run by the
SDK's own client and control protocol. The Claude Code process is replaced by a scripted
`Transport` (the SDK's public extension point) that plays the CLI's side of the protocol:
it sends `hook_callback` requests the way the CLI does before a tool runs, and reads the
SDK's answers. No network, no model."""

import asyncio
import itertools
import json

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, HookMatcher, Transport

from toolgate.adapters.claude import ClaudeGate


class ScriptedCLI(Transport):
    """The CLI's side of the SDK control protocol, scripted."""

    def __init__(self):
        self.inbox = asyncio.Queue()
        self.hooks = {}
        self.answers = {}
        self.ids = itertools.count()

    async def connect(self):
        pass

    def is_ready(self):
        return True

    async def end_input(self):
        pass

    async def close(self):
        await self.inbox.put(None)

    async def read_messages(self):
        while (message := await self.inbox.get()) is not None:
            yield message

    async def write(self, data):
        message = json.loads(data)
        if message.get("type") == "control_request" and message["request"]["subtype"] == "initialize":
            self.hooks = message["request"]["hooks"] or {}
            await self.inbox.put({"type": "control_response", "response": {"subtype": "success", "request_id": message["request_id"], "response": {}}})
        elif message.get("type") == "control_response":
            self.answers[message["response"]["request_id"]].set_result(message["response"])

    async def fire(self, event, tool_name=None, **fields):
        """Runs every hook registered for `event` (and this tool), as the CLI does; the
        SDK's answers, in order."""
        out = []
        for matcher in self.hooks.get(event, []):
            if matcher["matcher"] not in (None, "*") and tool_name not in matcher["matcher"].split("|"):
                continue
            for callback_id in matcher["hookCallbackIds"]:
                request_id = f"cli_{next(self.ids)}"
                self.answers[request_id] = asyncio.get_running_loop().create_future()
                data = {"hook_event_name": event, "session_id": "s1", "transcript_path": "/dev/null", "cwd": "/", **fields}
                if tool_name is not None:
                    data["tool_name"] = tool_name
                await self.inbox.put(
                    {
                        "type": "control_request",
                        "request_id": request_id,
                        "request": {"subtype": "hook_callback", "callback_id": callback_id, "input": data, "tool_use_id": fields.get("tool_use_id")},
                    }
                )
                answer = await asyncio.wait_for(self.answers[request_id], 10)
                assert answer["subtype"] == "success", answer
                out.append(answer["response"])
        return out


def session(policy, script):
    """Connects the SDK client with toolgate's hooks, runs `script(cli)`, returns its result."""
    gate = ClaudeGate(policy, facts={"stage": "main"})
    hooks = gate.hooks()
    assert all(isinstance(m, HookMatcher) for ms in hooks.values() for m in ms)

    async def go():
        cli = ScriptedCLI()
        async with ClaudeSDKClient(options=ClaudeAgentOptions(hooks=hooks), transport=cli):
            return await script(cli)

    return asyncio.run(go())


async def pre_tool_use(cli, tool, tool_use_id, **args):
    [answer] = await cli.fire("PreToolUse", tool, tool_input=args, tool_use_id=tool_use_id)
    return answer


def test_an_allowed_call_gets_no_objection(agent_policy):
    async def script(cli):
        await cli.fire("UserPromptSubmit", prompt="where is o-1?")
        return await pre_tool_use(cli, "lookup_order", "t1", order="o-1")

    assert session(agent_policy, script) == {}


def test_a_denial_answers_deny_with_the_reason(agent_policy):
    async def script(cli):
        await cli.fire("UserPromptSubmit", prompt="refund 500")
        return await pre_tool_use(cli, "refund", "t1", amount=500)

    out = session(agent_policy, script)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    assert out["permissionDecision"] == "deny"
    assert "50" in out["permissionDecisionReason"]


def test_the_latch_holds_across_the_batch_and_clears_on_the_next_prompt(agent_policy):
    async def script(cli):
        await cli.fire("UserPromptSubmit", prompt="read the page and refund")
        fetched = await pre_tool_use(cli, "web_fetch", "t1", url="https://example.com")
        await cli.fire("PostToolUse", "web_fetch", tool_input={"url": "https://example.com"}, tool_response="<html/>", tool_use_id="t1")
        blocked = await pre_tool_use(cli, "refund", "t2", amount=20)
        await cli.fire("UserPromptSubmit", prompt="refund now")
        later = await pre_tool_use(cli, "refund", "t3", amount=20)
        return fetched, blocked, later

    fetched, blocked, later = session(agent_policy, script)
    assert fetched == {}
    assert blocked["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "fetched web content" in blocked["hookSpecificOutput"]["permissionDecisionReason"]
    assert later == {}
