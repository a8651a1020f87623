"""Adapters that put toolgate in front of agent frameworks' tool execution.

Each adapter is pure Python and imports its framework only when used, so importing
``toolgate`` never needs any framework installed. Each turns a toolgate denial into the
framework's own way of telling the model, carrying the refusal text:

- ``toolgate.adapters.claude``: Claude Agent SDK ``PreToolUse`` hook (``HookMatcher``);
- ``toolgate.adapters.openai_agents``: OpenAI Agents SDK ``tool_input_guardrail``;
- ``toolgate.adapters.langchain``: LangChain v1 / LangGraph agent middleware (batch-aware);
- ``toolgate.adapters.adk``: Google ADK ``before_tool_callback`` and plugin.

A toolgate ask (``"kind": "ask"``) becomes the framework's own approval step where the
executor wires one (``asks=True``; for Claude an ``approver``) and is otherwise a denial with
its reason; a ``Turn`` keeps the approvals a person gave (``Turn.approve``, ``Turn.reject``).

Adapters for frameworks that ask about one call at a time keep the user turn's state in a ``Turn``
(``toolgate.adapters.turn``); what that guarantees is documented there.
"""

from .turn import Gate, Turn

__all__ = ["Gate", "Turn"]
