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
exceptions are ``CompileError`` (a policy that does not compile) and ``RequestError`` (a
request that cannot be read). Adapters for agent frameworks are in ``toolgate.adapters``.
"""

from ._native import (
    CompileError,
    Diagnostic,
    Policy,
    PolicyStore,
    RequestError,
    compile,
    load,
)

__all__ = [
    "CompileError",
    "Diagnostic",
    "Policy",
    "PolicyStore",
    "RequestError",
    "compile",
    "load",
]
