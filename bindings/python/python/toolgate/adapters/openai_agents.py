"""OpenAI Agents SDK: a ``tool_input_guardrail`` that rejects what the policy denies.

    from toolgate.adapters.openai_agents import OpenAIAgentsGate

    gate = OpenAIAgentsGate(toolgate.load("agent.gate"), facts={"stage": "main"})
    agent = Agent(name="shop", tools=gate.protect(refund, web_fetch))
    gate.start_turn()                      # once per user message
    await Runner.run(agent, user_message, hooks=gate.run_hooks())

A denial answers ``ToolGuardrailFunctionOutput.reject_content(reason)``: the tool does not
run and the model receives the refusal instead of its result; the run goes on. The SDK
applies tool guardrails to ``function_tool`` tools only; hosted tools, handoffs and
``Agent.as_tool()`` are not covered (its own documented limit), so keep those out of a stage
that needs guarding.

The guardrail is asked about one call at a time; with ``run_hooks()`` passed to the run, the
adapter judges each model response's function calls as one batch when the model answers
(``on_llm_end``), so the latch pre-scan holds as in the engine. The guardrail answers a call
only from the response judged last, and only for the very call judged there (call id, tool,
raw arguments) with no latch changed since: providers that number call ids per response
(``call_0``) never get an earlier response's verdict. The gate keeps the turn state for the
latch state between model responses; start a turn per user message with ``start_turn()``.
The model's raw argument text is judged by the engine's strict reader (a key given twice is
refused). See ``toolgate.adapters.turn``.

Asks: with ``OpenAIAgentsGate(..., asks=True)``, ``protect`` also gives each tool a
``needs_approval`` check, so a call toolgate asks about becomes the SDK's own approval
interruption (``result.interruptions``, a ``ToolApprovalItem``). Answer it through the gate,
which tells both the SDK's ``RunState`` and the turn, then resume the run::

    result = await Runner.run(agent, message)
    state = result.to_state()
    for item in result.interruptions:
        if person_says_yes(item):
            gate.approve(state, item)          # the turn keeps the approval, the SDK runs it
        else:
            gate.reject(state, item, "why")    # the model reads the refusal
    result = await Runner.run(agent, state)

The guardrail still judges the resumed call, with the turn's live approvals: an approval
used once, expired (the policy's ``approval_window``, measured from ``gate.approve``), or
given for other arguments does not let it run (the model reads the ask's refusal and may call
again, which asks again). Approve with ``gate.approve``, not ``state.approve`` alone (the
turn would hold no approval, so the call is refused), and never with ``always_approve``.
Without ``asks=True`` an ask is rejected like any denial, with its reason.
"""

from __future__ import annotations

import uuid
from typing import Any, Dict, Optional, Tuple

from .turn import Gate, Turn, rejected


class OpenAIAgentsGate(Gate):
    """The input guardrail (judge) and output guardrail (record a call that ran)."""

    def input_guardrail(self) -> Any:
        """A ``ToolInputGuardrail`` judging each call before it runs."""
        from agents import ToolGuardrailFunctionOutput, tool_input_guardrail

        @tool_input_guardrail(name="toolgate")
        def toolgate_judge(data: Any) -> Any:
            ctx = data.context
            turn, raw = self.turn(), ctx.tool_arguments or "{}"
            decision = turn.batch_decision(ctx.tool_call_id, ctx.tool_name, raw) or turn.judge_one(ctx.tool_name, raw, ctx.tool_call_id)
            if decision["allow"]:
                return ToolGuardrailFunctionOutput.allow(output_info=decision)
            return ToolGuardrailFunctionOutput.reject_content(decision["reason"], output_info=decision)

        return toolgate_judge

    def output_guardrail(self) -> Any:
        """A ``ToolOutputGuardrail`` that records each call that ran, for ``called_before``,
        and its output, for the turn's provenance checks (``from ingest``, a latch's
        ``blocks tainted``)."""
        from agents import ToolGuardrailFunctionOutput, tool_output_guardrail

        @tool_output_guardrail(name="toolgate_record")
        def toolgate_record(data: Any) -> Any:
            ctx = data.context
            try:
                self.record("", ctx.tool_name, ok=True, output=data.output, call_id=ctx.tool_call_id)
            except ValueError:
                # An output that is not JSON data: the call is recorded, its output is not, so
                # the turn's outputs stay incomplete and a check that reads them denies.
                pass
            return ToolGuardrailFunctionOutput.allow()

        return toolgate_record

    def run_hooks(self) -> Any:
        """``RunHooks`` for ``Runner.run(..., hooks=gate.run_hooks())``: when the model answers,
        its whole batch of function calls is judged together, so the latch pre-scan holds
        as in the engine (``[write, ingest]`` denies the write); the guardrail then answers
        each call from that judgement. Without them each call is judged alone, in order."""
        from agents import RunHooks

        gate = self

        class ToolgateRunHooks(RunHooks):
            async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
                calls = [
                    (item.call_id, item.name, item.arguments or "{}")
                    for item in getattr(response, "output", None) or []
                    if getattr(item, "type", None) == "function_call"
                ]
                if calls:
                    # Each model response is its own batch, whatever its call ids: a provider
                    # may number them per response.
                    gate.turn().judge_batch_once(f"response:{uuid.uuid4().hex}", calls, raw=True)

        return ToolgateRunHooks()

    def needs_approval(self, tool_name: str, then: Any = False) -> Any:
        """A ``needs_approval`` callable for the tool ``tool_name``: true when toolgate asks a
        person about the call (``Turn.preview``, which keeps the approvals for the guardrail),
        else the tool's own setting ``then`` (a bool or the SDK's callable). The SDK itself
        asks for approval, without calling this, when its argument parsing changed the
        model's arguments (``80`` for a ``float`` parameter); the guardrail still judges the
        call after an approval."""
        from agents.util._approvals import evaluate_needs_approval_setting

        async def toolgate_needs_approval(context: Any, params: Dict[str, Any], call_id: str) -> bool:
            if self.turn().preview(tool_name, params, call_id).get("kind") == "ask":
                return True
            return bool(await evaluate_needs_approval_setting(then, context, params, call_id))

        return toolgate_needs_approval

    def _ask_of(self, item: Any) -> Tuple[Turn, Optional[Dict[str, Any]]]:
        """The current turn, and toolgate's ask for the interrupted call (its tool and raw
        arguments, as the person sees them), or ``None`` if toolgate does not ask."""
        turn = self.turn()
        decision = turn.preview(item.name or "", item.arguments or "{}", item.call_id)
        return turn, decision if decision.get("kind") == "ask" else None

    def approve(self, state: Any, item: Any) -> None:
        """The person approved the interruption ``item``: the turn keeps the approval of
        exactly that call (from now, by the gate's clock) and ``state`` lets it run."""
        turn, ask = self._ask_of(item)
        if ask is not None:
            turn.approve(ask["approval"])
        state.approve(item)

    def reject(self, state: Any, item: Any, message: Optional[str] = None) -> None:
        """The person declined the interruption ``item``: the call does not run, and the
        model reads toolgate's refusal (with ``message``, the person's reason) as its
        result. The turn refuses the same call again without asking."""
        turn, ask = self._ask_of(item)
        if ask is not None:
            text = turn.reject(ask["approval"], message)["reason"]
        else:
            text = rejected({"tool": item.name or ""}, message)["reason"]
        state.reject(item, rejection_message=text)

    def protect(self, *tools: Any) -> list:
        """Adds both guardrails to each ``FunctionTool`` (and, with ``asks``, toolgate's
        ``needs_approval``, kept together with the tool's own) and returns the tools as a
        list."""
        judge, record = self.input_guardrail(), self.output_guardrail()
        for tool in tools:
            tool.tool_input_guardrails = [*(getattr(tool, "tool_input_guardrails", None) or []), judge]
            tool.tool_output_guardrails = [*(getattr(tool, "tool_output_guardrails", None) or []), record]
            if self.asks:
                tool.needs_approval = self.needs_approval(tool.name, getattr(tool, "needs_approval", False))
        return list(tools)
