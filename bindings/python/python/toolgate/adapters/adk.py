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

ADK asks about one call at a time, so the gate keeps a ``Turn`` per session, started afresh
whenever the ``invocation_id`` (one user message) changes; ``after_tool_callback`` records
each call that ran. See ``toolgate.adapters.turn`` for what that guarantees.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from .turn import Gate, Turn


def _denial(decision: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "error": decision["reason"],
        "toolgate": {"allow": False, "kind": decision.get("kind"), "rule": decision.get("rule")},
    }


class AdkGate(Gate):
    """Tool callbacks for an ``LlmAgent``, and ``plugin()`` for a ``Runner``."""

    def _turn_of(self, tool_context: Any) -> Turn:
        session = getattr(tool_context, "session", None)
        return self.turn(getattr(session, "id", "") or "", epoch=getattr(tool_context, "invocation_id", None))

    def before_tool_callback(self, tool: Any, args: Dict[str, Any], tool_context: Any) -> Optional[Dict[str, Any]]:
        """``None`` for an allowed call; the refusal dict (the tool's result) for a denied one."""
        decision = self._turn_of(tool_context).judge_one(tool.name, args, getattr(tool_context, "function_call_id", None))
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
