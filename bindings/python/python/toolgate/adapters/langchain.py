"""LangChain v1 / LangGraph: an agent middleware that judges each model message's tool calls
as one batch.

    from langchain.agents import create_agent
    from toolgate.adapters.langchain import toolgate_middleware

    agent = create_agent(model, tools, middleware=[toolgate_middleware(policy, facts={"stage": "main"})])

``after_model`` judges every tool call of the model's message together, so the latch
pre-scan holds exactly as in the engine: ``[write, ingest]`` denies the write. The verdicts
go into the agent state (a private key), and ``wrap_tool_call`` answers each call from them:
an allowed call runs; a denied one does not, and the model receives
``ToolMessage(content=reason, status="error")``. A call with no verdict (added after the
model spoke, or renamed since) or whose arguments changed since it was judged is denied.

A refused call's ``ToolMessage`` carries what toolgate said in its ``artifact`` (the model
reads only the content): ``{"toolgate": {"allow": False, "kind", "rule"}}``, and the
decision's ``provenance`` object when it has one.

State: ``before_agent`` starts each invocation (one user message) with latches clear; the
latch state of the turn travels in the agent state between model messages, so it survives a
checkpointer. ``facts.called`` is taken from the conversation's ``ToolMessage``s (a call
succeeded unless its status is ``"error"``) unless the facts you pass give it; each is dated
by the user turns since it ran (``turns_ago``: the ``HumanMessage``s after it), so
``called_within`` rules judge it as the other adapters do.

Provenance (``from ingest``, a latch's ``blocks tainted``): unless the facts you pass give
them, every judgement carries the turn's tool results as ``facts.outputs`` and the user's
message as ``facts.prompt``, both read from the agent state, so they survive a checkpointer
too. The prompt is the text of the ``HumanMessage`` the invocation started with. The outputs
are the ``ToolMessage``s after it, each ``{"id": tool_call_id, "tool": name, "output":
content}``, errors included, toolgate's own refusals not. The content is what LangChain gives
the model: a string stays a string (a tool's dict reaches the model, and the index, as its
JSON text, so its e-mail addresses, URLs, IBANs and long numbers are found but a bare name in
it is not), a list of content blocks stays that list. They are sent only when complete: every
call toolgate allowed this turn must have its result after the start, under its call id and
tool name, and each result must be JSON data. Otherwise (a result holding a Python object,
the start message rewritten away, a call whose result never came, a call allowed but refused
later because its arguments changed) no outputs are sent and every check that reads them
denies, for the rest of the turn.

Budgets over batches (``budget ... per turn``, ``per session``, ``per principal``, ``per
tenant``): each model message is judged with ``TurnState.judge`` on a ``TurnState`` the
middleware keeps per session, the mechanism every other adapter's ``Gate`` uses, so the counts
are kept and consumed in Rust, under the state's lock, as there. A session is the LangGraph
thread (``config["configurable"]["thread_id"]``), or what ``session(state, runtime)`` returns;
runs without a thread id share one session, so leaving the id out never starts a count again.
A turn is one invocation (``before_agent``). What a message's allowed calls consume is counted
once: a denied call consumes nothing, and with ``asks`` the judgement before the interrupt
counts nothing (LangGraph runs it again on resume; the judgement with the person's answer is
the one counted). The counts live in the process, from zero when it starts (a checkpointer
does not keep them), and a session's stay until ``end(thread_id)``; the facts you pass may not
bring their own ``spent`` (such a message is denied). A denial reads ``"... N of M left per
session"``, with ``kind`` ``"budget"`` and the budget's name as ``rule``.

Asks: with ``toolgate_middleware(..., asks=True)`` (and a checkpointer), the calls of a
message that toolgate asks about raise one LangGraph ``interrupt`` in
``HumanInTheLoopMiddleware``'s shape: ``{"action_requests": [{"name", "args",
"description"}], "review_configs": [{"action_name", "allowed_decisions": ["approve",
"reject"]}]}``, one entry per asking call in message order. Resume with
``Command(resume={"decisions": [{"type": "approve"} | {"type": "reject", "message": ...}]})``:
the message is judged again with the approved calls' digests in ``facts.approvals`` (each
lets one call run: two identical calls and one digest run once), and a rejected call is
answered with toolgate's refusal and the person's message. Approvals are used at once, in
that judgement, and never kept: the next message's same call asks again. Without ``asks``
an ask is a denial with its reason.
"""


import math
import threading
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union, cast

from .._native import Policy, PolicyStore, TurnState
from .turn import rejected, unjudged

LATCHED = "toolgate_latched"
VERDICTS = "toolgate_verdicts"
# The turn: {"start": id of the message it started at, "prompt": that message's text or None,
# "id": the turn's id in the session's `TurnState`}.
TURN = "toolgate_turn"
# The calls allowed this turn, [call id, tool] each: every one awaits its result.
ALLOWED = "toolgate_allowed"

# The deepest nesting of an output sent in a request (the request's own levels come on top
# of it, and the native module reads at most 128).
MAX_OUTPUT_DEPTH = 100

Facts = Union[Mapping[str, Any], Callable[[Any, Any], Mapping[str, Any]], None]
Session = Optional[Callable[[Any, Any], Any]]

_CLASS: Optional[type] = None


def toolgate_middleware(policy: Union[Policy, PolicyStore], facts: Facts = None, asks: bool = False, *, session: Session = None) -> Any:
    """An ``AgentMiddleware`` for ``create_agent``.

    ``facts`` is a mapping, or a function ``(state, runtime) -> mapping`` called for every
    model message (the stage, filled fields, ...). ``asks``: toolgate's asks interrupt the
    run for a person (see the module doc); else an ask is a denial with its reason.
    ``session``: a function ``(state, runtime) -> key`` naming the conversation whose budget
    counts a message is judged with (default: the LangGraph thread id; ``""`` without one).
    """
    return _middleware_class()(policy, facts, asks, session)


def _thread_of(runtime: Any) -> str:
    """The LangGraph thread the node runs in (``""`` without one): the session's key."""
    thread = getattr(getattr(runtime, "execution_info", None), "thread_id", None)
    if thread is None:
        try:
            from langgraph.config import get_config

            thread = (get_config().get("configurable") or {}).get("thread_id")
        except Exception:  # noqa: BLE001 - outside a run: no thread, the shared session
            thread = None
    return "" if thread is None else str(thread)


def _middleware_class() -> type:
    global _CLASS
    if _CLASS is None:
        _CLASS = _build()
    return _CLASS


def _build() -> type:
    from typing import Annotated

    from langchain.agents.middleware import AgentMiddleware, AgentState
    from langchain.agents.middleware.types import PrivateStateAttr
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.errors import GraphInterrupt
    from typing_extensions import NotRequired

    class ToolgateState(AgentState):
        toolgate_latched: NotRequired[Annotated[Any, PrivateStateAttr]]
        toolgate_verdicts: NotRequired[Annotated[Dict[str, Any], PrivateStateAttr]]
        toolgate_turn: NotRequired[Annotated[Dict[str, Any], PrivateStateAttr]]
        toolgate_allowed: NotRequired[Annotated[List[List[str]], PrivateStateAttr]]

    class ToolgateMiddleware(AgentMiddleware):
        """Judges each model message's tool calls as one batch; denials become error
        ``ToolMessage``s carrying the refusal."""

        state_schema = ToolgateState

        def __init__(self, policy: Union[Policy, PolicyStore], facts: Facts = None, asks: bool = False, session: Session = None) -> None:
            super().__init__()
            self.policy = policy
            self.facts = facts
            self.asks = asks
            self.session = session
            # A `TurnState` per session, for its budget counts (its latches too, ORed into
            # the agent state's). The executor's own prompt and outputs are sent with every
            # message, so the state never fills them in.
            self._states: Dict[str, TurnState] = {}
            self._lock = threading.Lock()

        def _state_of(self, state: Any, runtime: Any) -> TurnState:
            key = self.session(state, runtime) if self.session is not None else _thread_of(runtime)
            key = "" if key is None else str(key)
            with self._lock:
                turns = self._states.get(key)
                if turns is None:
                    turns = self._states[key] = TurnState(keeps_provenance=False)
                return turns

        def end(self, session: str = "") -> None:
            """Forgets a session's turn state (its ``per turn`` and ``per session`` counts).
            Only for a conversation that is over: a later message of that session starts
            its counts from zero."""
            with self._lock:
                self._states.pop(str(session), None)

        def before_agent(self, state: Any, runtime: Any) -> Dict[str, Any]:
            """A new user message: latches clear, no verdicts, no calls allowed; the turn
            starts at the last message (the user's), whose text is its prompt, under a new
            id in the session's ``TurnState`` (its ``per turn`` counts start again)."""
            messages = state.get("messages") or []
            last = messages[-1] if messages else None
            turn = {"start": getattr(last, "id", None), "prompt": _prompt(last), "id": f"langchain-turn:{uuid.uuid4().hex}"}
            return {LATCHED: False, VERDICTS: {}, TURN: turn, ALLOWED: []}

        async def abefore_agent(self, state: Any, runtime: Any) -> Dict[str, Any]:
            return self.before_agent(state, runtime)

        def after_model(self, state: Any, runtime: Any) -> Optional[Dict[str, Any]]:
            """Judges every tool call of the model's message together."""
            message = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
            if message is None or not message.tool_calls:
                return None
            calls = [{"id": str(c.get("id")), "tool": c["name"], "args": c.get("args") or {}} for c in message.tool_calls]
            facts = dict(self.facts(state, runtime) if callable(self.facts) else (self.facts or {}))
            facts["latched"] = state.get(LATCHED, False)
            if "called" not in facts:
                facts["called"] = _called(state["messages"])
            turn = state.get(TURN) or {}
            allowed = [list(a) for a in state.get(ALLOWED) or []]
            if "prompt" not in facts and isinstance(turn.get("prompt"), str):
                facts["prompt"] = turn["prompt"]
            if "outputs" not in facts:
                outputs = _outputs(state["messages"], turn.get("start"), allowed)
                if outputs is not None:
                    facts["outputs"] = outputs
            policy = self.policy.current() if isinstance(self.policy, PolicyStore) else self.policy
            turn_id = turn.get("id") if isinstance(turn.get("id"), str) else None
            try:
                turns = self._state_of(state, runtime)
                # With asks, LangGraph runs this again when the run resumes: a judgement
                # that may end in an interrupt counts nothing; the one the calls run on does.
                response = turns.judge(policy, {"facts": facts, "calls": calls}, turn_id, spend=not self.asks)
                decisions = cast(List[Dict[str, Any]], response["decisions"])
                asking = [d for d in decisions if d.get("kind") == "ask"]
                if self.asks and asking:
                    response, decisions = self._ask(turns, policy, turn_id, facts, calls, asking)
                elif self.asks:
                    response = turns.judge(policy, {"facts": facts, "calls": calls}, turn_id)
                    decisions = cast(List[Dict[str, Any]], response["decisions"])
            except GraphInterrupt:
                raise  # the run pauses for the person; judged again when it resumes
            except Exception as e:  # noqa: BLE001 - any failure denies, with its reason
                return {VERDICTS: {c["id"]: unjudged(c["id"], c["tool"], str(e)) for c in calls}}
            args = {c["id"]: c["args"] for c in calls}
            allowed += [[d["id"], d["tool"]] for d in decisions if d.get("allow")]
            return {
                LATCHED: response["latched"],
                VERDICTS: {d["id"]: dict(d, judged_args=args[d["id"]]) for d in decisions},
                ALLOWED: allowed,
            }

        def _ask(
            self, turns: TurnState, policy: Policy, turn_id: Optional[str], facts: Dict[str, Any], calls: List[Dict[str, Any]], asking: List[Dict[str, Any]]
        ) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
            """Interrupts for the person's decisions on ``asking``; the message judged again
            (and counted) with the approved digests: its response, and its decisions with the
            declined asks refused."""
            from langgraph.types import interrupt

            args = {c["id"]: c["args"] for c in calls}
            answer = interrupt(
                {
                    "action_requests": [{"name": d["tool"], "args": args[d["id"]], "description": d["reason"]} for d in asking],
                    "review_configs": [{"action_name": d["tool"], "allowed_decisions": ["approve", "reject"]} for d in asking],
                }
            )
            answers = list((answer or {}).get("decisions") or []) if isinstance(answer, Mapping) else []
            if len(answers) != len(asking):
                raise ValueError(f"{len(answers)} decisions for {len(asking)} asks")
            approved, declined = [], {}
            for d, a in zip(asking, answers):
                if isinstance(a, Mapping) and a.get("type") == "approve":
                    approved.append(d["approval"])
                else:
                    declined[d["id"]] = a.get("message") if isinstance(a, Mapping) else None
            response = turns.judge(policy, {"facts": dict(facts, approvals=approved), "calls": calls}, turn_id)
            decisions = cast(List[Dict[str, Any]], response["decisions"])
            return response, [rejected(d, declined[d["id"]]) if d["id"] in declined and d.get("kind") == "ask" else d for d in decisions]

        async def aafter_model(self, state: Any, runtime: Any) -> Optional[Dict[str, Any]]:
            return self.after_model(state, runtime)

        def _refusal(self, request: Any) -> Optional[Any]:
            call = request.tool_call
            call_id = str(call.get("id"))
            verdict = (request.state.get(VERDICTS) or {}).get(call_id) if isinstance(request.state, Mapping) else None
            if verdict is None or verdict["tool"] != call["name"]:
                verdict = unjudged(call_id, call["name"], "the call was not in the model message toolgate judged")
            elif verdict.get("judged_args", {}) != (call.get("args") or {}):
                verdict = unjudged(call_id, call["name"], "its arguments changed after toolgate judged them")
            if verdict["allow"]:
                return None
            said: Dict[str, Any] = {"allow": False, "kind": verdict.get("kind"), "rule": verdict.get("rule")}
            if verdict.get("provenance") is not None:
                said["provenance"] = verdict["provenance"]
            return ToolMessage(content=verdict["reason"], tool_call_id=call.get("id"), name=call["name"], status="error", artifact={"toolgate": said})

        def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            """Runs an allowed call; answers a denied one with an error ``ToolMessage``."""
            refusal = self._refusal(request)
            return handler(request) if refusal is None else refusal

        async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            refusal = self._refusal(request)
            return await handler(request) if refusal is None else refusal

    return ToolgateMiddleware


def _called(messages: Sequence[Any]) -> List[Dict[str, Any]]:
    """``facts.called`` from a conversation: every named ``ToolMessage``, dated by the user
    turns since it ran (the ``HumanMessage``s that follow it; 0 in the current turn)."""
    from langchain_core.messages import HumanMessage, ToolMessage

    called: List[Dict[str, Any]] = []
    turns_after = sum(1 for m in messages if isinstance(m, HumanMessage))
    for m in messages:
        if isinstance(m, HumanMessage):
            turns_after -= 1
        elif isinstance(m, ToolMessage) and m.name:
            called.append({"tool": m.name, "ok": m.status != "error", "turns_ago": max(turns_after, 0)})
    return called


def _prompt(message: Any) -> Optional[str]:
    """The text of a ``HumanMessage`` (its string, or its text blocks joined); ``None`` for
    any other message or one without text."""
    from langchain_core.messages import HumanMessage

    if not isinstance(message, HumanMessage):
        return None
    content = message.content
    if isinstance(content, str):
        return content
    texts = [b if isinstance(b, str) else b.get("text") for b in content if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")]
    texts = [t for t in texts if isinstance(t, str)]
    return "\n".join(texts) if texts else None


def _refused(message: Any) -> bool:
    """Whether a ``ToolMessage`` is toolgate's refusal (its ``artifact``): the call did not
    run. A tool's message faking one is not sent, and does not answer its call."""
    said = message.artifact.get("toolgate") if isinstance(message.artifact, dict) else None
    return message.status == "error" and isinstance(said, dict) and said.get("allow") is False


def _outputs(messages: Sequence[Any], start: Any, allowed: List[List[str]]) -> Optional[List[Dict[str, Any]]]:
    """``facts.outputs`` of the turn that started at the message with id ``start``: the tool
    results after it, each under its call id; ``None`` (a check that reads them denies) if
    that message is gone or some call in ``allowed`` has no result kept."""
    from langchain_core.messages import ToolMessage

    at = None if start is None else next((i for i in range(len(messages) - 1, -1, -1) if getattr(messages[i], "id", None) == start), None)
    if at is None:
        return None
    awaited = [(str(call_id), str(tool)) for call_id, tool in allowed]
    outputs = []
    for m in messages[at + 1 :]:
        if not isinstance(m, ToolMessage) or _refused(m) or not _json_data(m.content):
            continue
        call_id, tool = str(m.tool_call_id), m.name or ""
        outputs.append({"id": call_id, "tool": tool, "output": m.content})
        if (call_id, tool) in awaited:
            awaited.remove((call_id, tool))
    return None if awaited else outputs


def _json_data(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON data the native module reads: None, a bool, an int of 64
    bits, a finite float, a str of valid Unicode, a list or tuple of such, a dict of str keys
    to such; at most ``MAX_OUTPUT_DEPTH`` deep."""
    if depth > MAX_OUTPUT_DEPTH:
        return False
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate
            return False
        return True
    if isinstance(value, int):
        return -(1 << 63) <= value < (1 << 64)
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_json_data(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_data(k) and _json_data(v, depth + 1) for k, v in value.items())
    return False
