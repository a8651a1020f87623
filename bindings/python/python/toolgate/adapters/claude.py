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
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .turn import Gate


class ClaudeGate(Gate):
    """The hook callbacks, and the ``hooks`` mapping for ``ClaudeAgentOptions``."""

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
        self.start_turn(input_data.get("session_id", ""), epoch=input_data.get("prompt_id"))
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
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": decision["reason"],
            }
        }

    async def post_tool_use(self, input_data: Dict[str, Any], tool_use_id: Optional[str], context: Any) -> Dict[str, Any]:
        """A call ran: recorded for ``called_before`` rules."""
        self.record(input_data.get("session_id", ""), input_data.get("tool_name", ""), ok=True, epoch=input_data.get("prompt_id"))
        return {}
