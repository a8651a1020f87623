"""Claude Agent SDK: a ``PreToolUse`` hook that denies what the policy denies.

    from claude_agent_sdk import ClaudeAgentOptions
    from toolgate.adapters.claude import ClaudeGate

    gate = ClaudeGate(toolgate.load("agent.gate"), facts={"stage": "main"})
    options = ClaudeAgentOptions(hooks=gate.hooks())

A denial answers ``permissionDecision: "deny"`` with the refusal as
``permissionDecisionReason``, which Claude reads as the tool's failure. An allowed call gets
no answer from toolgate (``{}``), so Claude's own permission rules and modes still apply:
toolgate only ever removes permissions.

Claude asks about one call at a time, so the gate keeps the turn state per ``session_id``,
with Claude's ``prompt_id`` (one user prompt) as the turn's id: ``UserPromptSubmit`` starts
a new turn (latches clear), and every event is dated by its own prompt, so a late
``PostToolUse`` of the previous prompt records into that prompt's turn and never resets the
current one. ``PostToolUse`` records a call that ran. Without a ``prompt_id`` (an older CLI)
``UserPromptSubmit`` starts the turn every later event belongs to. See
``toolgate.adapters.turn`` for what that guarantees.

Asks: give the gate an ``approver`` (the person) and pass ``gate.can_use_tool`` to the SDK::

    async def approver(ask):               # {"tool", "args", "rule", "reason", "approval"}
        return await ui.confirm(ask)       # True (yes), False or a str (no, with the reason)

    gate = ClaudeGate(policy, facts=..., approver=approver)
    options = ClaudeAgentOptions(hooks=gate.hooks(), can_use_tool=gate.can_use_tool)

A call toolgate asks about answers ``permissionDecision: "ask"`` with the ask's reason, and
the CLI sends the SDK its ``can_use_tool`` permission request. ``can_use_tool`` judges the
call again: if toolgate still asks, it asks the approver; a yes is kept as the turn's
approval and the call judged with it (allowed once: a second identical call asks again), a
no is refused with toolgate's refusal (and, for the rest of the turn, without asking again).
A permission request toolgate did not raise (Claude's own rules) goes to ``fallback`` if the
gate has one, else it is denied. Without an approver an ask is a denial with its reason.
"""

from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, Dict, List, Optional, Union

from .turn import Gate

Approver = Callable[[Dict[str, Any]], Union[bool, str, Awaitable[Union[bool, str]]]]


class ClaudeGate(Gate):
    """The hook callbacks, the ``hooks`` mapping for ``ClaudeAgentOptions``, and
    ``can_use_tool`` for asks.

    ``approver`` is the person: called with an ask (``{"tool", "args", "rule", "reason",
    "approval"}``), it returns ``True`` for yes, ``False`` or the reason (a ``str``) for no;
    it may be async. ``fallback`` is the SDK ``can_use_tool`` callback that answers
    permission requests toolgate did not raise. Other arguments as ``Gate``.
    """

    def __init__(self, policy: Any, facts: Any = None, *, approver: Optional[Approver] = None, fallback: Any = None, **options: Any) -> None:
        super().__init__(policy, facts, asks=approver is not None, **options)
        self.approver = approver
        self.fallback = fallback
        # tool_use_id -> (session id, prompt id) of the PreToolUse that answered "ask".
        self._asked: Dict[str, Any] = {}

    def hooks(self, matcher: Optional[str] = None) -> Dict[str, List[Any]]:
        """``{"UserPromptSubmit", "PreToolUse", "PostToolUse"}`` → ``[HookMatcher]``.

        ``matcher`` narrows ``PreToolUse`` to some tools (Claude's matcher syntax, e.g.
        ``"Bash|Write"``); the default judges every tool.
        """
        from claude_agent_sdk import HookMatcher

        return {
            "UserPromptSubmit": [HookMatcher(hooks=[self.user_prompt_submit])],
            "PreToolUse": [HookMatcher(matcher=matcher, hooks=[self.pre_tool_use])],
            "PostToolUse": [HookMatcher(matcher=matcher, hooks=[self.post_tool_use])],
        }

    async def user_prompt_submit(self, input_data: Dict[str, Any], tool_use_id: Optional[str], context: Any) -> Dict[str, Any]:
        """A new user message: a new turn for the session (a repeated one changes nothing)."""
        self.start_turn(input_data.get("session_id", ""), epoch=input_data.get("prompt_id"), prompt=input_data.get("prompt"))
        return {}

    async def pre_tool_use(self, input_data: Dict[str, Any], tool_use_id: Optional[str], context: Any) -> Dict[str, Any]:
        """Judges the call; a denial answers ``deny`` with the refusal."""
        turn = self.turn(input_data.get("session_id", ""), epoch=input_data.get("prompt_id"))
        decision = turn.judge_one(
            input_data.get("tool_name", ""),
            input_data.get("tool_input", {}),
            input_data.get("tool_use_id") or tool_use_id,
        )
        if decision["allow"]:
            return {}
        ask = decision.get("kind") == "ask" and self.approver is not None
        if ask:
            self._asked[str(input_data.get("tool_use_id") or tool_use_id)] = (input_data.get("session_id", ""), input_data.get("prompt_id"))
            while len(self._asked) > 256:
                self._asked.pop(next(iter(self._asked)))
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "ask" if ask else "deny",
                "permissionDecisionReason": decision["reason"],
            }
        }

    async def can_use_tool(self, tool_name: str, tool_input: Dict[str, Any], context: Any) -> Any:
        """The SDK's ``can_use_tool`` callback: asks the approver about a call toolgate asks
        about, and answers ``PermissionResultAllow`` once the approved call is allowed, else
        ``PermissionResultDeny`` with toolgate's refusal."""
        from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

        tool_use_id = getattr(context, "tool_use_id", None)
        key, epoch = self._asked.pop(str(tool_use_id), ("", None))
        turn = self.turn(key, epoch=epoch)
        decision = turn.preview(tool_name, tool_input, tool_use_id)
        if decision["allow"] or decision.get("kind") != "ask" or self.approver is None:
            if decision["allow"] and self.fallback is not None:
                return await self.fallback(tool_name, tool_input, context)
            if decision["allow"]:
                return PermissionResultDeny(message="toolgate's approver answers only toolgate's asks; this permission request was Claude's own.")
            return PermissionResultDeny(message=decision["reason"])
        ask = {"tool": tool_name, "args": tool_input, "rule": decision.get("rule"), "reason": decision["reason"], "approval": decision["approval"]}
        answer = self.approver(ask)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is not True:
            refusal = turn.reject(decision["approval"], answer if isinstance(answer, str) else None)
            return PermissionResultDeny(message=refusal["reason"])
        turn.approve(decision["approval"])
        decision = turn.judge_one(tool_name, tool_input, tool_use_id)
        if decision["allow"]:
            return PermissionResultAllow()
        return PermissionResultDeny(message=decision["reason"])

    async def post_tool_use(self, input_data: Dict[str, Any], tool_use_id: Optional[str], context: Any) -> Dict[str, Any]:
        """A call ran: recorded for ``called_before`` rules, and its ``tool_response`` as the
        call's output for the turn's provenance checks."""
        self.record(
            input_data.get("session_id", ""),
            input_data.get("tool_name", ""),
            ok=True,
            epoch=input_data.get("prompt_id"),
            output=input_data.get("tool_response"),
            call_id=input_data.get("tool_use_id") or tool_use_id,
        )
        return {}
