"""The state of one user turn, for frameworks that show toolgate one tool call at a time.

toolgate judges a *batch*: the latch pre-scan ORs every latch-setting call of the batch into
the state before any call is judged, so ``[write, ingest]`` denies the write as surely as
``[ingest, write]``. The Claude Agent SDK, the OpenAI Agents SDK and Google ADK instead ask
about one call at a time. Where the adapter can still see the model's whole message (ADK's
session, the OpenAI SDK's ``on_llm_end``) it judges the batch once with
``Turn.judge_batch_once`` and answers each call from it; otherwise (Claude) each call is
judged alone, in order.

The state lives in Rust: a ``Gate`` keeps one ``toolgate.TurnState`` per conversation key,
the turn model every toolgate surface shares (the coding-agent hooks, ``/v1/hooks``, the
MCP proxy), and a ``Turn`` is one turn of it, known by its id. A session keeps, for its
recent turns:

- the latches each judgement set, per turn (a turn's latches only ever grow);
- the calls that ran (``facts.called``, for ``called_before`` and ``called_within`` rules),
  as the adapter records them after the tool ran, each dated by its turn: a request of a
  turn carries the executor's ``facts.called`` followed by the session's calls with their
  ``turns_ago`` (this turn's are ``0``). ``Turn.called`` lists what was passed in and what
  this turn recorded, undated, so a list copied into a later turn can never make an old call
  look recent (``called_within`` denies on an undated call); ``Turn.history()`` gives the
  list aged for the next turn.

Turn ids are the framework's own new-turn signal: ADK's ``invocation_id``, Claude's
``prompt_id``, or an id the gate makes up when the executor calls ``Gate.start_turn``. An
id never seen starts a new turn; a known one goes back to *its* turn and latches, so a late
event of an earlier turn (Claude's ``PostToolUse`` of the previous prompt) never resets the
current one.

What that guarantees:

- every call is judged by the engine, with the facts the executor gave plus its turn's
  latch state and the session's recorded calls; a denial reaches the model as the
  framework's own refusal;
- once a call that sets a latch has been *judged* in a turn (allowed or not), every later
  call of that turn the latch blocks is denied; only a new turn starts clear;
- placing a call, judging it and recording its latches happen under one lock, so no other
  thread's judgement falls in between;
- a verdict of a batch judged whole answers only a call of that very batch (same model
  message, call id, tool, arguments, turn and policy revision), once, and every such
  verdict is dropped as soon as a judgement changes a latch, so none judged before a latch
  is served after it (a call it no longer answers is judged alone, with the turn's latches);
- if toolgate cannot judge a call (a request the engine refuses, a turn the policy can no
  longer judge, an exception), the call is denied with the reason, never allowed.

Asking a person: a decision ``"kind": "ask"`` is a denial carrying an ``approval`` digest.
A ``Turn`` keeps the approvals a person gave in it (``Turn.approve(digest)``, stamped with a
monotonic clock) and sends the live ones in ``facts.approvals`` with every judgement:

- an approval lets exactly the call it was asked for run (same policy revision, rule, tool
  and canonical arguments), once: it is dropped as soon as a decision allowed a call with it,
  so a second identical call asks again;
- an approval older than the policy's ``approval_window`` (``approvals { valid_for .. }``,
  ten minutes by default) is dropped and never sent;
- approvals belong to their turn: a new turn has none;
- ``Turn.reject(digest, message)`` records that the person said no: that call is then
  refused (``"kind": "rejected"``, with the reason) without asking again in this turn.

An adapter maps an ask to its framework's own approval step where the executor wires one,
and otherwise passes it on as the denial it is, with its reason (asking fails closed).

What it cannot guarantee: a latch-blocked call judged *before* the setter in the same model
message is allowed, because the setter has not been seen yet. That call was chosen by the
model before the setter's output existed, so no content the setter brings in can have
shaped it; but if your policy relies on order-independence within a batch, use the LangChain
middleware (which sees the whole batch) or call ``Turn.judge`` with the whole batch yourself.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union, cast

from .._native import Policy, PolicyStore, TurnError, TurnState

Source = Union[Policy, PolicyStore]
Facts = Union[Mapping[str, Any], Callable[[], Mapping[str, Any]], None]

# Turns per conversation key whose `Turn` objects a gate keeps (the session itself keeps its
# own bounded history in Rust); an older turn's object is made again when asked for.
KEPT_TURN_OBJECTS = 64

# Asks a turn remembers by digest, so `Turn.reject` can name the call it refuses.
KEPT_ASKS = 256


def _policy(source: Source) -> Policy:
    return source.current() if isinstance(source, PolicyStore) else source


def _new_id() -> str:
    """A turn id no framework sends: for a turn the executor starts without one."""
    return f"toolgate-turn:{uuid.uuid4().hex}"


def unjudged(call_id: str, tool: str, why: str) -> Dict[str, Any]:
    """The denial an adapter gives a call toolgate could not judge (fail closed)."""
    return {
        "id": call_id,
        "tool": tool,
        "allow": False,
        "kind": "unjudged",
        "rule": "toolgate",
        "reason": f"This call was not run: toolgate could not judge it ({why}).",
    }


_DIGEST = re.compile(r"ap1:[0-9a-f]{64}")


def _digest(digest: Any) -> str:
    """``digest`` if it is an approval digest (``ap1:`` and 64 hex digits), else raises."""
    if not isinstance(digest, str):
        raise TypeError(f"an approval digest is a str, not {type(digest).__name__}")
    if _DIGEST.fullmatch(digest) is None:
        raise ValueError(f"not an approval digest (ap1: and 64 hex digits): {digest!r}")
    return digest


def rejected(decision: Mapping[str, Any], message: Optional[str] = None) -> Dict[str, Any]:
    """The denial for an ask a person declined: ``decision`` (the ask) turned into
    ``"kind": "rejected"``, keeping its ``id``, ``tool``, ``rule`` and ``approval``, with a
    reason telling the model the call did not run (and the person's ``message``, if any)."""
    tool = decision.get("tool", "")
    reason = f"A person declined this call of {tool}. It has NOT run. Do not retry it, and do not tell the user it happened."
    if message:
        reason += f" Their reason: {message}"
    out = {k: decision[k] for k in ("id", "tool", "rule", "approval") if k in decision}
    out.update(allow=False, kind="rejected", reason=reason)
    return out


def _not_an_object(raw: str) -> Optional[str]:
    """Why ``raw`` is not the JSON text of one object, or ``None``."""
    try:
        parsed = json.loads(raw)
    except ValueError as e:
        return f"its arguments are not JSON: {e}"
    return None if isinstance(parsed, dict) else "its arguments are not an object"


def _aged(entry: Mapping[str, Any], turns_ago: int) -> Dict[str, Any]:
    return dict(entry, turns_ago=turns_ago)


def _older(entry: Mapping[str, Any]) -> Dict[str, Any]:
    """``entry`` one turn older; an undated entry stays undated (its age is unknown)."""
    age = entry.get("turns_ago")
    return dict(entry) if not isinstance(age, int) or isinstance(age, bool) else _aged(entry, age + 1)



# "No output given" for ``record``: ``None`` is an output (a tool that returned nothing).
_NO_OUTPUT: Any = object()

class Turn:
    """One user turn of a session: the executor's facts, and the turn's id in the session's
    ``TurnState`` (its latches and recorded calls live there).

    ``Turn(policy, facts)`` is a turn of a session of its own. A ``Gate`` makes the turns of
    its sessions, passing ``state`` and ``turn_id``; making a ``Turn`` signals its id to the
    state, which starts a turn for an id it has never seen and changes nothing for a known
    one. Thread-safe: calls judged from several threads are judged one after another, each
    with the state the previous left.

    The turn also keeps the approvals a person gave in it (``approve``, ``reject``; see the
    module doc). ``clock`` is the monotonic clock they are stamped and aged with, in seconds
    (default ``time.monotonic``; a test passes its own). ``facts["approvals"]``, if given, are
    approvals given as the turn starts: the turn keeps them like any other, and sends them
    while they are live.
    """

    def __init__(
        self,
        policy: Source,
        facts: Optional[Mapping[str, Any]] = None,
        *,
        state: Optional[TurnState] = None,
        turn_id: Optional[str] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        facts = dict(facts or {})
        self._source = policy
        self._clock = clock
        # digest -> when the person approved it (clock seconds); digest -> their "no".
        self._approvals: Dict[str, float] = {}
        self._rejections: Dict[str, Optional[str]] = {}
        # The latest asks judged in this turn, by digest (for `reject`'s refusal).
        self._asked: "OrderedDict[str, Dict[str, Any]]" = OrderedDict()
        # Held from reading the live approvals to dropping those a judgement used, so two
        # threads never both send (and use) one approval.
        self._judging = threading.Lock()
        for digest in facts.pop("approvals", None) or []:
            self.approve(digest)
        # None: the executor did not say what was called, so `called_before` rules see the
        # fact as absent (and fail open, as the policy says) until the session records a
        # call. A list, even empty, is known history: an empty `called` must reach the engine
        # as "nothing was called", not be dropped into "unknown".
        called = facts.pop("called", None)
        self._carried: Optional[List[Dict[str, Any]]] = None if called is None else [dict(e) for e in called]
        # The executor's `latched`, if any, stays in the facts: every judgement ORs it into
        # the turn's latches, and records it into the turn.
        self._facts = facts
        self._state = TurnState() if state is None else state
        self._id = _new_id() if turn_id is None else str(turn_id)
        self._next_id = 0
        self._lock = threading.Lock()
        try:
            self._state.signal(_policy(policy), self._id)
        except TurnError:
            # The session cannot start another turn: every call of this one is judged (and
            # denied) with that reason, since its id stays unknown.
            pass
        if facts.get("latched"):
            # Record the executor's latches now, so `latched` shows them before any call. A
            # state the policy refuses (an undeclared latch name) denies every call instead.
            try:
                self._state.judge(_policy(policy), {"facts": self._request_facts(), "calls": []}, self._id)
            except Exception:  # noqa: BLE001 - each later judgement fails the same way, denied
                pass

    @property
    def id(self) -> str:
        """The turn's id in its session (the framework's epoch, or one the gate made up)."""
        return self._id

    @property
    def state(self) -> TurnState:
        """The session's state this turn belongs to."""
        return self._state

    @property
    def latched(self) -> Any:
        """The turn's latch state after the calls judged so far (a bool, or a dict by latch
        name): what the next call of this turn is judged with."""
        return self._state.latches(_policy(self._source), self._id)

    @property
    def called(self) -> List[Dict[str, Any]]:
        """The calls passed in and recorded in this turn so far, as ``facts.called``
        entries; those recorded this turn are undated here (see ``history`` to carry them
        forward)."""
        return list(self._carried or []) + self._state.recorded(_policy(self._source), self._id)

    def history(self) -> List[Dict[str, Any]]:
        """``facts.called`` for the *next* user turn: every entry one turn older (this
        turn's calls get ``"turns_ago": 1``; an undated entry passed in stays undated)."""
        recorded = self._state.recorded(_policy(self._source), self._id)
        return [_older(e) for e in self._carried or []] + [_aged(e, 1) for e in recorded]

    @property
    def approvals(self) -> List[str]:
        """The approvals this turn would send now: given, not yet used, and not older than
        the policy's ``approval_window``; oldest first."""
        with self._judging:
            return self._live()

    def approve(self, digest: str) -> None:
        """Records that a person approved the ask whose ``approval`` digest this is, now (by
        the turn's clock). The next judgement of exactly that call allows it, once, if it
        comes within the policy's ``approval_window``. Undoes a ``reject`` of the digest.
        Raises ``ValueError`` (``TypeError``) for what is not an approval digest."""
        digest = _digest(digest)
        with self._judging:
            self._rejections.pop(digest, None)
            self._approvals.pop(digest, None)
            self._approvals[digest] = self._clock()

    def reject(self, digest: str, message: Optional[str] = None) -> Dict[str, Any]:
        """Records that a person declined the ask whose digest this is (``message``: their
        reason, shown to the model). For the rest of the turn that call is refused with
        ``"kind": "rejected"`` instead of asking again; an approval of it is dropped.
        Returns the refusal (``rejected``'s shape) for the call of this turn that asked
        with the digest, as the model should read it."""
        digest = _digest(digest)
        with self._judging:
            self._approvals.pop(digest, None)
            self._rejections[digest] = message
            ask = self._asked.get(digest, {"approval": digest})
        return rejected(ask, message)

    def _live(self) -> List[str]:
        """The live approvals, dropping the expired ones; the caller holds ``_judging``."""
        window = _policy(self._source).approval_window
        now = self._clock()
        for digest, given in list(self._approvals.items()):
            if now - given > window:
                del self._approvals[digest]
        return list(self._approvals)

    def _settle(self, decisions: List[Dict[str, Any]], consume: bool = True) -> List[Dict[str, Any]]:
        """Drops each approval a decision used (``consume``); turns an ask the person
        declined into its refusal. The caller holds ``_judging``."""
        out = []
        for d in decisions:
            digest = d.get("approval")
            if d.get("allow") and digest is not None:
                if consume:
                    self._approvals.pop(digest, None)
            elif d.get("kind") == "ask" and digest is not None:
                self._asked.pop(digest, None)
                self._asked[digest] = d
                while len(self._asked) > KEPT_ASKS:
                    self._asked.popitem(last=False)
                if digest in self._rejections:
                    d = rejected(d, self._rejections[digest])
            out.append(d)
        return out

    def _request_facts(self) -> Dict[str, Any]:
        """The executor's facts for a request of this turn; the session adds its latches and
        recorded calls when it judges."""
        facts = dict(self._facts)
        if self._carried is not None:
            facts["called"] = [dict(e) for e in self._carried]
        return facts

    def judge(self, calls: Iterable[Mapping[str, Any]]) -> List[Dict[str, Any]]:
        """Judges a batch of ``{"id", "tool", "args"}`` calls together; one decision each."""
        return self._judge(calls, None)

    def _judge(self, calls: Iterable[Mapping[str, Any]], batch: Optional[str], consume: bool = True) -> List[Dict[str, Any]]:
        calls = [dict(c) for c in calls]
        who = [(str(c.get("id", "")), str(c.get("tool", ""))) for c in calls]
        return self._decide(lambda facts: {"facts": facts, "calls": calls}, who, batch, consume)

    def judge_raw(self, calls: Sequence[Tuple[str, str, str]]) -> List[Dict[str, Any]]:
        """Judges ``(id, tool, raw_arguments)`` calls together, each with its arguments as
        the model's raw JSON text: the engine's strict reader reads them, so a key the model
        gave twice is refused instead of one copy judged and the other run. A call whose
        text is not a JSON object is denied, and still counts in the batch's latch
        pre-scan (judged with no arguments)."""
        return self._judge_raw(calls, None)

    def _judge_raw(self, calls: Sequence[Tuple[str, str, str]], batch: Optional[str], consume: bool = True) -> List[Dict[str, Any]]:
        parts, bad = [], {}
        for call_id, tool, raw in calls:
            why = _not_an_object(raw)
            if why is not None:
                bad[call_id] = unjudged(call_id, tool, why)
                raw = "{}"
            # `raw` parsed as one complete object, so embedding it cannot close the
            # request's own brackets; the engine re-reads it strictly.
            parts.append(json.dumps({"id": call_id, "tool": tool})[:-1] + f', "args": {raw}}}')

        def build(facts: Dict[str, Any]) -> str:
            return f'{{"facts": {json.dumps(facts)}, "calls": [{", ".join(parts)}]}}'

        decisions = self._decide(build, [(call_id, tool) for call_id, tool, _ in calls], batch, consume)
        return [bad.get(d["id"], d) for d in decisions]

    def judge_batch_once(self, batch_id: str, calls: Sequence[Any], raw: bool = False) -> List[Dict[str, Any]]:
        """Judges the model message ``batch_id`` whole: its ``{"id", "tool", "args"}`` calls
        (``raw``: ``(id, tool, raw_arguments)`` tuples, see ``judge_raw``). Later,
        ``batch_decision`` answers each call from it, so the latch pre-scan holds as in the
        engine. For frameworks that call a hook per call but let the adapter see the model's
        message. Asked again for the same message (the same id and calls) while its verdicts
        stand, it does not judge it twice; if they were dropped (a latch changed since), it
        judges the message again with the turn's latches. Returns the decisions."""
        if raw:
            return self._judge_raw(calls, str(batch_id))
        return self._judge(calls, str(batch_id))

    def batch_decision(self, call_id: Optional[str], tool: str, args: Any, batch_id: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """The decision the batch ``batch_id`` (default: the batch this session judged last)
        holds for this call, if it was judged in this turn with this call id, tool name and
        these arguments, was not given already, and no latch changed since; else ``None``
        (judge it alone)."""
        if call_id is None:
            return None
        try:
            # A decision as the dict the adapters pass around (the stubs type it as a Decision).
            kept = cast(Optional[Dict[str, Any]], self._state.decision(_policy(self._source), str(call_id), tool, args, self._id, batch_id))
        except Exception:  # noqa: BLE001 - no kept verdict: the call is judged alone
            return None
        if kept is not None and kept.get("kind") == "ask":
            with self._judging:
                if kept.get("approval") in self._live():
                    # Approved since the batch was judged: judge it again, with the approval.
                    return None
                return self._settle([kept])[0]
        return kept

    def _decide(self, build: Callable[[Dict[str, Any]], Any], who: List[Any], batch: Optional[str], consume: bool = True) -> List[Dict[str, Any]]:
        with self._judging:
            try:
                facts = self._request_facts()
                live = self._live()
                if live:
                    facts["approvals"] = live
                # A judgement no call runs on (`consume` false: a preview) adds nothing to the
                # budget counts either; the call that runs is judged, and counted, again.
                response = self._state.judge(_policy(self._source), build(facts), self._id, batch, spend=consume)
            except Exception as e:  # noqa: BLE001 - any failure denies, with its reason
                return [unjudged(call_id, tool, str(e)) for call_id, tool in who]
            return self._settle(cast(List[Dict[str, Any]], response["decisions"]), consume)

    def judge_one(self, tool: str, args: Any, call_id: Optional[str] = None) -> Dict[str, Any]:
        """Judges one call as a batch of one, after the calls judged before it this turn."""
        return self._one(tool, args, call_id)

    def _one(self, tool: str, args: Any, call_id: Optional[str], consume: bool = True) -> Dict[str, Any]:
        if call_id is None:
            with self._lock:
                self._next_id += 1
                call_id = f"call-{self._next_id}"
        if isinstance(args, (str, bytes)):
            text = args if isinstance(args, str) else args.decode("utf-8", "replace")
            return self._judge_raw([(call_id, tool, text)], None, consume)[0]
        if not isinstance(args, Mapping):
            return unjudged(call_id, tool, "its arguments are not an object")
        return self._judge([{"id": call_id, "tool": tool, "args": args}], None, consume)[0]

    def preview(self, tool: str, args: Any, call_id: Optional[str] = None) -> Dict[str, Any]:
        """The decision ``judge_one`` would give this call now, without using up an
        approval or adding to a budget's count: a call the live approvals allow shows as
        allowed, and the approval stays for the judgement that runs it. For a framework that
        asks whether a call needs a person before it asks whether the call may run; never
        run a call on it (judge it with ``judge_one``). It is a judgement all the same (a
        latch the call sets is set)."""
        return self._one(tool, args, call_id, consume=False)

    def record(self, tool: str, ok: bool = True, *, output: Any = _NO_OUTPUT, call_id: Optional[str] = None) -> None:
        """Records that ``tool`` ran in this turn (``ok``: it succeeded), for
        ``called_before`` and ``called_within`` rules; with ``output``, also what it
        returned, for the turn's provenance checks (``facts.outputs``)."""
        self._state.record_call(tool, bool(ok), self._id)
        if output is not _NO_OUTPUT:
            self._state.record_output(self.policy, call_id or "call", tool, output, self._id)


class _Session:
    """A gate's conversation: its ``TurnState``, its current turn, the recent ``Turn``s."""

    def __init__(self) -> None:
        self.state = TurnState()
        self.current: Optional[Turn] = None
        self.turns: "OrderedDict[str, Turn]" = OrderedDict()


class Gate:
    """Holds a policy (or a ``PolicyStore``) and the executor's facts, and one session's
    turn state per conversation key (a session id, or ``""`` for a gate used by one
    conversation).

    ``facts`` is a mapping, or a function returning one, read when a turn starts: the stage,
    filled fields and other facts the executor knows. A new turn starts on the framework's
    "new user message" signal where the adapter sees one (an epoch never seen before), or
    when the executor calls ``start_turn``.

    ``clock`` is the monotonic clock (seconds) the turns stamp and age approvals with
    (default ``time.monotonic``). ``asks``: the executor shows toolgate's asks to a person
    through the framework's approval step (each adapter says which); without it an ask is
    passed on as the denial it is, with its reason.
    """

    def __init__(self, policy: Source, facts: Facts = None, *, clock: Callable[[], float] = time.monotonic, asks: bool = False) -> None:
        self.policy = policy
        self.clock = clock
        self.asks = asks
        self._facts = facts
        self._sessions: Dict[str, _Session] = {}
        self._lock = threading.Lock()

    def _read_facts(self) -> Mapping[str, Any]:
        facts = self._facts() if callable(self._facts) else self._facts
        return facts or {}

    def _session(self, key: str) -> _Session:
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session()
        return session

    def _enter(self, session: _Session, turn_id: str, facts: Optional[Mapping[str, Any]]) -> Turn:
        """The turn ``turn_id`` of ``session``, signalled: a new turn (and the current one)
        if the session never saw the id, else the turn it already is."""
        turn = session.turns.get(turn_id)
        if turn is not None:
            session.turns.move_to_end(turn_id)
            return turn
        before = session.state.turns
        turn = Turn(self.policy, self._read_facts() if facts is None else facts, state=session.state, turn_id=turn_id, clock=self.clock)
        session.turns[turn_id] = turn
        while len(session.turns) > KEPT_TURN_OBJECTS:
            session.turns.popitem(last=False)
        if session.current is None or session.state.turns != before:
            session.current = turn
        return turn

    def start_turn(self, key: str = "", facts: Optional[Mapping[str, Any]] = None, epoch: Any = None, prompt: Optional[str] = None) -> Turn:
        """Starts a new user turn for ``key``: latches clear, facts are read again (or
        ``facts``). ``epoch`` is the framework's id of the new turn where it sends one; an
        epoch the session already knows is a late or repeated signal and changes nothing
        (its turn is returned as it is). ``prompt``, the user's message, is sent as
        ``facts.prompt`` with the turn's calls; it is kept only when that turn is the
        session's current one, so a late signal of an earlier turn cannot make its message
        vouch for the current turn's values."""
        with self._lock:
            session = self._session(key)
            turn = self._enter(session, _new_id() if epoch is None else str(epoch), facts)
            if prompt is not None:
                # The state checks that the turn is its current one (not the gate's record of
                # it, which a late call of a turn the state no longer keeps can outdate).
                session.state.set_prompt(prompt, turn.id)
            return turn

    def turn(self, key: str = "", epoch: Any = None) -> Turn:
        """The turn for ``key``.

        ``epoch`` is the framework's id of the user turn where it has one (ADK's
        ``invocation_id``, Claude's ``prompt_id``): an epoch never seen starts a new turn; a
        known epoch is its own turn, with its own latches, even after later turns started
        (a late event never resets the current turn). Without ``epoch``: the current turn,
        started if there is none yet.
        """
        with self._lock:
            session = self._session(key)
            if epoch is not None:
                return self._enter(session, str(epoch), None)
            if session.current is None:
                return self._enter(session, _new_id(), None)
            return session.current

    def record(self, key: str, tool: str, ok: bool = True, epoch: Any = None, *, output: Any = _NO_OUTPUT, call_id: Optional[str] = None) -> None:
        """Records that ``tool`` ran for ``key`` (``ok``: it succeeded), in turn ``epoch``
        (default: the current turn). Never starts a turn: a call of an epoch the session
        does not know is kept undated (never recent for ``called_within``). With
        ``output``, also what it returned, sent as ``facts.outputs`` with the turn's later
        calls once every untrusted call's output is in (docs/agents.md)."""
        with self._lock:
            session = self._session(key)
            if epoch is not None:
                turn_id: Optional[str] = str(epoch)
            else:
                turn_id = session.current.id if session.current is not None else None
            session.state.record_call(tool, bool(ok), turn_id)
            if output is not _NO_OUTPUT:
                session.state.record_output(self.policy, call_id or "call", tool, output, turn_id)

    def end(self, key: str = "") -> None:
        """Forgets ``key``'s session. Only for a conversation that is over: a later call
        under the same key would start a fresh session with its latches clear."""
        with self._lock:
            self._sessions.pop(key, None)
