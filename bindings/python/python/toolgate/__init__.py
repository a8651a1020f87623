"""toolgate: decides which tool calls an LLM agent may run, in process.

Compile a policy once, then judge each batch of tool calls before dispatching it::

    import toolgate

    policy = toolgate.load("shop.gate")
    response = policy.decide({"facts": {"stage": "support"},
                              "calls": [{"id": "1", "tool": "refund", "args": {"amount": 20}}]})
    for d in response["decisions"]:
        if not d["allow"]:
            print(d["id"], d["reason"])   # the refusal the model reads

A denial is a result (``allow: False`` with a ``reason``), never an exception. The only
exceptions are ``CompileError`` (a policy that does not compile), ``RequestError`` (a
request that cannot be read) and ``TurnError`` (a ``TurnState`` turn that cannot be judged).
``TurnState`` keeps a session's turns and latches for code that sees one call or one model
message at a time; adapters for agent frameworks, built on it, are in ``toolgate.adapters``.
"""

from ._native import (
    CompileError,
    Diagnostic,
    Policy,
    PolicyStore,
    RequestError,
    TurnError,
    TurnState,
    compile,
    load,
)

__all__ = [
    "CompileError",
    "Diagnostic",
    "Policy",
    "PolicyStore",
    "RequestError",
    "TurnError",
    "TurnState",
    "compile",
    "load",
]
