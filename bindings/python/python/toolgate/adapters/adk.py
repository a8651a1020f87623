"""Google ADK: a ``before_tool_callback`` (or a plugin) whose returned dict becomes the
tool's result.

    from google.adk.agents import LlmAgent
    from toolgate.adapters.adk import AdkGate

    gate = AdkGate(toolgate.load("agent.gate"), facts={"stage": "main"})
    agent = LlmAgent(..., before_tool_callback=gate.before_tool_callback,
                     after_tool_callback=gate.after_tool_callback)
    # or, for every agent of an app: Runner(..., plugins=[gate.plugin()])

For a denied call the callback returns ``{"error": reason, "toolgate": {...}}``: ADK skips
the tool and sends that dict to the model as the function response. An allowed call returns
``None`` and runs.

ADK asks about one call at a time, but the model's message is in the session by then, so the
adapter judges the message's whole batch at its first call: the latch pre-scan holds as in
the engine (``[write, ingest]`` denies the write). The gate keeps a ``Turn`` per session,
started afresh whenever the ``invocation_id`` (one user message) changes, for the latch
state between model messages; ``after_tool_callback`` records each call that ran.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .turn import Gate, Turn


def _denial(decision: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "error": decision["reason"],
        "toolgate": {"allow": False, "kind": decision.get("kind"), "rule": decision.get("rule")},
    }


def _batch_of(tool_context: Any, call_id: Optional[str]) -> Optional[Tuple[str, List[Dict[str, Any]]]]:
    """The model event holding ``call_id`` and all its calls, from the session."""
    session = getattr(tool_context, "session", None)
    if call_id is None or session is None:
        return None
    for event in reversed(getattr(session, "events", None) or []):
        calls = event.get_function_calls() if hasattr(event, "get_function_calls") else []
        if any(c.id == call_id for c in calls):
            return event.id, [{"id": c.id, "tool": c.name, "args": dict(c.args or {})} for c in calls]
    return None


class AdkGate(Gate):
    """Tool callbacks for an ``LlmAgent``, and ``plugin()`` for a ``Runner``."""

    def _turn_of(self, tool_context: Any) -> Turn:
        session = getattr(tool_context, "session", None)
        return self.turn(getattr(session, "id", "") or "", epoch=getattr(tool_context, "invocation_id", None))

    def before_tool_callback(self, tool: Any, args: Dict[str, Any], tool_context: Any) -> Optional[Dict[str, Any]]:
        """``None`` for an allowed call; the refusal dict (the tool's result) for a denied one.

        The model's message is already in the session when ADK runs its tools, so the whole
        batch is judged together at its first call (the latch pre-scan holds); a call whose
        arguments were changed since, or whose message cannot be found, is judged alone
        with the turn's state.
        """
        turn = self._turn_of(tool_context)
        call_id = getattr(tool_context, "function_call_id", None)
        batch = _batch_of(tool_context, call_id)
        if batch is not None:
            turn.judge_batch_once(*batch)
        decision = turn.batch_decision(call_id, tool.name, dict(args or {})) or turn.judge_one(tool.name, args, call_id)
        return None if decision["allow"] else _denial(decision)

    def after_tool_callback(self, tool: Any, args: Dict[str, Any], tool_context: Any, tool_response: Any) -> None:
        """Records a call that ran (one whose result is not an ``error`` dict)."""
        failed = isinstance(tool_response, dict) and "error" in tool_response
        self._turn_of(tool_context).record(tool.name, ok=not failed)
        return None

    def plugin(self, name: str = "toolgate") -> Any:
        """A ``BasePlugin`` applying the same callbacks to every agent of a ``Runner``."""
        from google.adk.plugins.base_plugin import BasePlugin

        gate = self

        class ToolgatePlugin(BasePlugin):
            async def before_tool_callback(self, *, tool: Any, tool_args: Dict[str, Any], tool_context: Any) -> Optional[Dict[str, Any]]:
                return gate.before_tool_callback(tool, tool_args, tool_context)

            async def after_tool_callback(self, *, tool: Any, tool_args: Dict[str, Any], tool_context: Any, result: Any) -> Optional[Dict[str, Any]]:
                gate.after_tool_callback(tool, tool_args, tool_context, result)
                return None

        return ToolgatePlugin(name=name)
