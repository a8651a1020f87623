"""The state of one user turn, for frameworks that show toolgate one tool call at a time.

toolgate judges a *batch*: the latch pre-scan ORs every latch-setting call of the batch into
the state before any call is judged, so ``[write, ingest]`` denies the write as surely as
``[ingest, write]``. The Claude Agent SDK, the OpenAI Agents SDK and Google ADK instead ask
about one call at a time. Where the adapter can still see the model's whole message (ADK's
session, the OpenAI SDK's ``on_llm_end``) it judges the batch once with
``Turn.judge_batch_once`` and answers each call from it; otherwise (Claude) each call is
judged alone, in order. A ``Turn`` carries, between calls of one user turn:

- the latch state each decision returned (it only ever grows within the turn), and
- the calls that ran and succeeded (``facts.called``, for ``called_before`` and
  ``called_within`` rules), as the adapter records them after the tool ran. The requests the
  ``Turn`` builds date them this turn (``"turns_ago": 0``); entries the executor passed in
  keep the ages it gave them. ``Turn.called`` lists them undated, so a list copied into a
  later turn can never make an old call look recent (``called_within`` denies on an undated
  call); ``Turn.history()`` gives the list aged for the next turn.

What that guarantees:

- every call is judged by the engine, with the facts the executor gave plus the turn's
  latch state and successful calls so far; a denial reaches the model as the framework's
  own refusal;
- once a call that sets a latch has been *judged* in the turn (allowed or not), every later
  call the latch blocks is denied until the executor starts a new turn;
- the turn's state is never lost in the allowing direction: it is dropped only when the
  executor (or the adapter, on the framework's "new user message" signal) starts a new turn;
- if toolgate cannot judge a call (a request the engine refuses, an exception), the call is
  denied with the reason, never allowed.

What it cannot guarantee: a latch-blocked call judged *before* the setter in the same model
message is allowed, because the setter has not been seen yet. That call was chosen by the
model before the setter's output existed, so no content the setter brings in can have
shaped it; but if your policy relies on order-independence within a batch, use the LangChain
middleware (which sees the whole batch) or call ``Turn.judge`` with the whole batch yourself.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .._native import Policy, PolicyStore

Source = Union[Policy, PolicyStore]
Facts = Union[Mapping[str, Any], Callable[[], Mapping[str, Any]], None]


def _policy(source: Source) -> Policy:
    return source.current() if isinstance(source, PolicyStore) else source


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


class Turn:
    """One user turn: the facts, the latch state so far, and the calls that succeeded.

    Thread-safe: calls judged from several threads are judged one after another, each with
    the state the previous left.
    """

    def __init__(self, policy: Source, facts: Optional[Mapping[str, Any]] = None) -> None:
        facts = dict(facts or {})
        self._source = policy
        self._latched: Any = facts.pop("latched", False)
        # None: the executor did not say what was called, so `called_before` rules see the
        # fact as absent (and fail open, as the policy says) until the turn records a call.
        # A list, even empty, is known history: an empty `called` must reach the engine as
        # "nothing was called", not be dropped into "unknown".
        called = facts.pop("called", None)
        self._called: Optional[List[Dict[str, Any]]] = None if called is None else list(called)
        # The first `_carried` entries came with the facts; the rest were recorded this turn.
        self._carried = 0 if called is None else len(self._called or [])
        self._facts = facts
        self._next_id = 0
        self._lock = threading.Lock()
        # Decisions of batches judged whole, by the framework's id of the model message.
        self._batches: Dict[str, Dict[str, Tuple[Dict[str, Any], Any]]] = {}
        self._batch_lock = threading.Lock()

    @property
    def latched(self) -> Any:
        """The latch state after the calls judged so far (a bool, or a dict by latch name)."""
        return self._latched

    @property
    def called(self) -> List[Dict[str, Any]]:
        """The calls passed in and recorded so far, as ``facts.called`` entries; those
        recorded this turn are undated here (see ``history`` to carry them forward)."""
        with self._lock:
            return list(self._called or [])

    def history(self) -> List[Dict[str, Any]]:
        """``facts.called`` for the *next* user turn: every entry one turn older (this
        turn's calls get ``"turns_ago": 1``; an undated entry passed in stays undated)."""
        with self._lock:
            return [_aged(e, 1) if i >= self._carried else _older(e) for i, e in enumerate(self._called or [])]

    def _called_fact(self) -> Optional[List[Dict[str, Any]]]:
        """``facts.called`` for a request of this turn: recorded calls dated this turn."""
        if self._called is None:
            return None
        return [_aged(e, 0) if i >= self._carried else e for i, e in enumerate(self._called)]

    def judge(self, calls: Iterable[Mapping[str, Any]]) -> List[Dict[str, Any]]:
        """Judges a batch of ``{"id", "tool", "args"}`` calls together; one decision each."""
        calls = [dict(c) for c in calls]
        return self._decide(lambda facts: {"facts": facts, "calls": calls}, [(str(c.get("id", "")), str(c.get("tool", ""))) for c in calls])

    def judge_raw(self, calls: Sequence[Tuple[str, str, str]]) -> List[Dict[str, Any]]:
        """Judges ``(id, tool, raw_arguments)`` calls together, each with its arguments as
        the model's raw JSON text: the engine's strict reader reads them, so a key the model
        gave twice is refused instead of one copy judged and the other run. A call whose
        text is not a JSON object is denied, and still counts in the batch's latch
        pre-scan (judged with no arguments)."""
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

        decisions = self._decide(build, [(call_id, tool) for call_id, tool, _ in calls])
        return [bad.get(d["id"], d) for d in decisions]

    def judge_batch_once(self, batch_id: str, calls: Sequence[Any], raw: bool = False) -> None:
        """Judges the model message ``batch_id`` whole, once: its ``{"id", "tool", "args"}``
        calls (``raw``: ``(id, tool, raw_arguments)`` tuples, see ``judge_raw``). Later,
        ``batch_decision`` answers each call from it, so the latch pre-scan holds as in the
        engine. For frameworks that call a hook per call but let the adapter see the model's
        message."""
        with self._batch_lock:
            if batch_id in self._batches:
                return
            if raw:
                judged = self.judge_raw(calls)
                args = {c[0]: (c[1], c[2]) for c in calls}
            else:
                judged = self.judge(calls)
                args = {str(c["id"]): (c["tool"], dict(c.get("args") or {})) for c in calls}
            self._batches[batch_id] = {d["id"]: (d, args.get(d["id"])) for d in judged}

    def batch_decision(self, call_id: Optional[str], tool: str, args: Any) -> Optional[Dict[str, Any]]:
        """The decision a batch judged by ``judge_batch_once`` holds for this call, if it was
        judged with this tool name and these arguments; else ``None`` (judge it alone)."""
        with self._batch_lock:
            for decisions in self._batches.values():
                found = decisions.get(call_id) if call_id is not None else None
                if found is not None:
                    decision, judged = found
                    return decision if judged == (tool, args) else None
        return None

    def _decide(self, build: Callable[[Dict[str, Any]], Any], who: List[Any]) -> List[Dict[str, Any]]:
        with self._lock:
            facts = dict(self._facts, latched=self._latched)
            called = self._called_fact()
            if called is not None:
                facts["called"] = called
            try:
                response = _policy(self._source).decide(build(facts))
            except Exception as e:  # noqa: BLE001 - any failure denies, with its reason
                return [unjudged(call_id, tool, str(e)) for call_id, tool in who]
            self._latched = response["latched"]
            return response["decisions"]

    def judge_one(self, tool: str, args: Any, call_id: Optional[str] = None) -> Dict[str, Any]:
        """Judges one call as a batch of one, after the calls judged before it this turn."""
        if call_id is None:
            with self._lock:
                self._next_id += 1
                call_id = f"call-{self._next_id}"
        if isinstance(args, (str, bytes)):
            text = args if isinstance(args, str) else args.decode("utf-8", "replace")
            return self.judge_raw([(call_id, tool, text)])[0]
        if not isinstance(args, Mapping):
            return unjudged(call_id, tool, "its arguments are not an object")
        return self.judge([{"id": call_id, "tool": tool, "args": args}])[0]

    def record(self, tool: str, ok: bool = True) -> None:
        """Records that ``tool`` ran this turn (``ok``: it succeeded), for ``called_before``
        and ``called_within`` rules."""
        with self._lock:
            if self._called is None:
                self._called = []
            self._called.append({"tool": tool, "ok": bool(ok)})


class Gate:
    """Holds a policy (or a ``PolicyStore``) and the executor's facts, and one ``Turn`` per
    conversation key (a session id, or ``""`` for a gate used by one conversation).

    ``facts`` is a mapping, or a function returning one, read when a turn starts: the stage,
    filled fields and other facts the executor knows. A new turn starts on the framework's
    "new user message" signal where the adapter sees one, or when the executor calls
    ``start_turn``.
    """

    def __init__(self, policy: Source, facts: Facts = None) -> None:
        self.policy = policy
        self._facts = facts
        self._turns: Dict[str, Turn] = {}
        self._epochs: Dict[str, Any] = {}
        self._lock = threading.Lock()

    def _read_facts(self) -> Mapping[str, Any]:
        facts = self._facts() if callable(self._facts) else self._facts
        return facts or {}

    def start_turn(self, key: str = "", facts: Optional[Mapping[str, Any]] = None) -> Turn:
        """Starts a new user turn for ``key``: latches clear, facts are read again."""
        turn = Turn(self.policy, self._read_facts() if facts is None else facts)
        with self._lock:
            self._turns[key] = turn
        return turn

    def turn(self, key: str = "", epoch: Any = None) -> Turn:
        """The current turn for ``key``, started if there is none yet.

        ``epoch`` is the framework's id of the user turn where it has one (ADK's
        ``invocation_id``, Claude's ``prompt_id``): a different epoch than the last one seen
        for ``key`` starts a new turn.
        """
        with self._lock:
            turn = self._turns.get(key)
            if epoch is not None and self._epochs.get(key, epoch) != epoch:
                turn = None
            if epoch is not None:
                self._epochs[key] = epoch
            if turn is None:
                turn = self._turns[key] = Turn(self.policy, self._read_facts())
            return turn

    def end(self, key: str = "") -> None:
        """Forgets ``key``'s turn. Only for a conversation that is over: a later call under
        the same key would start a fresh turn with its latches clear."""
        with self._lock:
            self._turns.pop(key, None)
            self._epochs.pop(key, None)
