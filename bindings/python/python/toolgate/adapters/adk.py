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
the engine (``[write, ingest]`` denies the write). Each call is answered from the verdicts of
its own message (its event), never from another message's, and not once a latch changed
since they were judged. The gate keeps the turn state per ADK session; the
``invocation_id`` (one user message) is the turn's id, so a new one starts a new turn and a
known one is always its own turn, with its own latches. ``after_tool_callback`` records each
call into its invocation's turn.

Provenance (``from ingest``, a latch's ``blocks tainted``): ``after_tool_callback`` also
records each tool's result, as the tool returned it, into its invocation's turn under ADK's
function call id (``tool_context.function_call_id``): a string as a string, a dict or list as
it is, an ``{"error": ...}`` result too (the call recorded as failed). A result that is not
JSON data (a ``datetime``, an object) is not kept, and neither is a long-running tool's
pending result; the turn then awaits that call's output, so every check that reads the
outputs denies for the rest of the turn. The invocation's user message
(``tool_context.user_content``, its text parts) is the turn's ``facts.prompt``, set by its
tool calls with the invocation's id through ``TurnState.set_prompt(prompt, turn)``, which
keeps it only while that invocation is the session's current turn (a late call of an earlier
invocation sets none). A denial's ``toolgate``
dict carries the decision's ``provenance`` object when it has one.

Asks: with ``AdkGate(..., asks=True)`` a call toolgate asks about calls ADK's own
``tool_context.request_confirmation`` (hint: the ask's reason; payload: ``{"toolgate":
{"approval", "rule"}}``) and ADK pauses with its ``adk_request_confirmation`` call. The
person's ``ToolConfirmation`` re-runs the call through the callback: ``confirmed`` is kept as
the turn's approval of exactly that call and the call judged with it (it runs once; the next
identical call asks again); not confirmed, the call is refused with toolgate's refusal. The
re-run comes in the invocation of the person's answer, so it is judged in that turn, alone.
Without ``asks`` an ask is a denial with its reason.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .turn import Gate, Turn


def _denial(decision: Dict[str, Any]) -> Dict[str, Any]:
    said: Dict[str, Any] = {"allow": False, "kind": decision.get("kind"), "rule": decision.get("rule")}
    if decision.get("provenance") is not None:
        said["provenance"] = decision["provenance"]
    return {"error": decision["reason"], "toolgate": said}


def _is_denial(result: Any) -> bool:
    """Whether ``result`` has the shape of toolgate's refusal (``_denial``): the call did not
    run, so it has no output. A tool returning that shape itself only loses its output (an
    allowed untrusted call's output stays awaited: the turn's outputs are incomplete)."""
    said = result.get("toolgate") if isinstance(result, dict) else None
    return isinstance(said, dict) and said.get("allow") is False


def _text(content: Any) -> Optional[str]:
    """The text parts of a ``types.Content`` (a user message), joined; ``None`` if none."""
    texts = [p.text for p in getattr(content, "parts", None) or [] if isinstance(getattr(p, "text", None), str) and not getattr(p, "thought", None)]
    return "\n".join(texts) if texts else None


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

    def _key_of(self, tool_context: Any) -> Tuple[str, Any]:
        """The gate's key (the ADK session) and the turn's id (the invocation)."""
        session = getattr(tool_context, "session", None)
        return getattr(session, "id", "") or "", getattr(tool_context, "invocation_id", None)

    def _turn_of(self, tool_context: Any) -> Turn:
        key, epoch = self._key_of(tool_context)
        turn = self.turn(key, epoch=epoch)
        prompt = _text(getattr(tool_context, "user_content", None))
        if prompt is not None:
            # Kept only while the invocation is its session's current turn, checked by the
            # state under its own lock: a late call of an earlier invocation must not make
            # its message vouch for the current turn's values.
            turn.state.set_prompt(prompt, turn.id)
        return turn

    def before_tool_callback(self, tool: Any, args: Dict[str, Any], tool_context: Any) -> Optional[Dict[str, Any]]:
        """``None`` for an allowed call; the refusal dict (the tool's result) for a denied one.

        The model's message is already in the session when ADK runs its tools, so the whole
        batch is judged together at its first call (the latch pre-scan holds); a call whose
        arguments were changed since, or whose message cannot be found, is judged alone
        with the turn's state.
        """
        turn = self._turn_of(tool_context)
        call_id = getattr(tool_context, "function_call_id", None)
        confirmation = getattr(tool_context, "tool_confirmation", None)
        if self.asks and confirmation is not None:
            return self._confirmed(turn, tool, args, call_id, confirmation, tool_context)
        batch = _batch_of(tool_context, call_id)
        decision = None
        if batch is not None:
            event_id, calls = batch
            turn.judge_batch_once(event_id, calls)
            decision = turn.batch_decision(call_id, tool.name, dict(args or {}), batch_id=event_id)
        if decision is None:
            decision = turn.judge_one(tool.name, args, call_id)
        if decision["allow"]:
            return None
        if self.asks and decision.get("kind") == "ask":
            return self._request(decision, tool_context)
        return _denial(decision)

    def _request(self, decision: Dict[str, Any], tool_context: Any) -> Dict[str, Any]:
        """Asks ADK for the person's confirmation of the call; its result until then."""
        tool_context.request_confirmation(hint=decision["reason"], payload={"toolgate": {"approval": decision["approval"], "rule": decision.get("rule")}})
        # The pause is no result for the model to answer: ADK waits for the person.
        tool_context.actions.skip_summarization = True
        return _denial(decision)

    def _confirmed(self, turn: Turn, tool: Any, args: Dict[str, Any], call_id: Optional[str], confirmation: Any, tool_context: Any) -> Optional[Dict[str, Any]]:
        """The re-run of a call after the person answered ADK's confirmation request."""
        decision = turn.preview(tool.name, args, call_id)
        if decision.get("kind") != "ask":
            if decision["allow"]:
                # The call runs: judged for that, so it uses its approval and is counted.
                decision = turn.judge_one(tool.name, args, call_id)
            return None if decision["allow"] else _denial(decision)
        if not getattr(confirmation, "confirmed", False):
            return _denial(turn.reject(decision["approval"]))
        turn.approve(decision["approval"])
        decision = turn.judge_one(tool.name, args, call_id)
        if decision["allow"]:
            return None
        return self._request(decision, tool_context) if decision.get("kind") == "ask" else _denial(decision)

    def after_tool_callback(self, tool: Any, args: Dict[str, Any], tool_context: Any, tool_response: Any) -> None:
        """Records the call (failed if its result is an ``error`` dict) and, unless toolgate
        refused it, its result as the call's output (see the module doc)."""
        failed = isinstance(tool_response, dict) and "error" in tool_response
        key, epoch = self._key_of(tool_context)
        pending = (getattr(tool, "is_long_running", False) or getattr(tool, "_defers_response", False)) and not tool_response
        if _is_denial(tool_response) or pending:
            # No output to keep: a refusal is toolgate's own text, and a long-running tool's
            # real result comes later, past this callback (its call stays awaited).
            self.record(key, tool.name, ok=not failed, epoch=epoch)
            return None
        try:
            self.record(key, tool.name, ok=not failed, epoch=epoch, output=tool_response, call_id=getattr(tool_context, "function_call_id", None))
        except ValueError:
            # Not JSON data: the call is recorded, its output is not, so the turn's outputs
            # stay incomplete and a check that reads them denies.
            pass
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
