"""Type stubs of the native extension ``toolgate._native`` (re-exported by ``toolgate``).

The wire types (a request, a response, a decision) are generated from the engine's Rust
types into ``_wire.pyi``; everything here is the package's own API."""

import os
from typing import Any, Dict, List, Literal, Mapping, Optional, Union

from ._wire import DecideRequest, Decision, LatchState, Response

Request = Union[DecideRequest, Dict[str, Any], str, bytes]
"""A request: a dict (``DecideRequest`` types its standard keys), or JSON text as str or bytes."""

class Diagnostic:
    """One diagnostic of a policy: an error or a warning, where it is, and what to do."""

    severity: Literal["error", "warning"]
    message: str
    file: str
    line: int
    column: int
    help: Optional[str]
    rendered: str
    """This diagnostic alone, rendered as ``file:line:col`` with the source line and caret."""

class CompileError(ValueError):
    """A policy that does not compile; ``str()`` is the rendered ``file:line:col`` text."""

    diagnostics: List[Diagnostic]

class RequestError(ValueError):
    """A request that cannot be read; ``field`` names the field at fault when there is one."""

    field: Optional[str]
    line: Optional[int]
    column: Optional[int]

class TurnError(RuntimeError):
    """A turn that cannot be judged: the policy no longer declares a latch set in it, or the
    session holds too many latched turns (or one turn came under too many ids)."""

class Policy:
    """A compiled policy: immutable, safe to share across threads."""

    @property
    def name(self) -> str:
        """The policy's module name."""
    @property
    def revision(self) -> str:
        """The content hash of the policy source; every response names it."""
    @property
    def approval_window(self) -> float:
        """How long an approval of one of this policy's asks may be used once given, in
        seconds: the policy's ``approvals { valid_for .. }``, 600.0 when it sets none."""
    @property
    def may_ask(self) -> bool:
        """Whether some latch or rule of this policy can ask a person (``asks``, ``ask when``)."""
    @property
    def warnings(self) -> List[Diagnostic]:
        """The warnings the policy compiled with."""
    def decide(self, request: Request) -> Response:
        """Judges a batch of calls; returns the JSON response's shape. A denial is a result.
        An ask is a denial with ``kind == "ask"`` and its ``approval`` digest (``"ap1:"`` and
        64 hex digits); that digest in ``facts.approvals`` allows exactly that call, and the
        allowed decision names it in ``approval``."""
    def offer(self, request: Request) -> Dict[str, Any]:
        """The tool definitions to show the model for a turn (``{"facts", "tools"}`` in)."""
    def explain(self, request: Request) -> List[Dict[str, Any]]:
        """Each call's decision and the checks the judge ran to make it, in order."""

class PolicyStore:
    """Holds the policy in force; ``swap`` replaces it while other threads decide."""

    def __init__(self, policy: Policy) -> None: ...
    def current(self) -> Policy:
        """The policy in force; never blocks."""
    def swap(self, policy: Policy) -> None:
        """Puts ``policy`` in force; decisions holding the previous one finish with it."""

Source = Union[Policy, PolicyStore]
"""A policy, or a store whose policy in force is read at each call."""

class TurnState:
    """The turn state of one session (the Rust ``toolgate_turns::SessionTurns`` every
    surface shares): its recent turns known by their ids, each turn's latches, and the calls
    that ran. Thread-safe; ``judge`` places, decides and latches a batch under one lock.

    Turn ids are the framework's new-turn signal: an id never seen starts a turn; a known id
    goes back to its own turn and latches, whatever came in between."""

    def __init__(self, *, keeps_provenance: bool = True) -> None:
        """A session with no turn signalled yet. ``keeps_provenance=False``: the executor
        sends ``facts.prompt`` and ``facts.outputs`` itself with every batch (the LangChain
        middleware); one it leaves out is judged unknown (a check reading it denies), never
        filled in from this state, and ``set_prompt`` keeps nothing."""
    def signal(self, policy: Source, id: Optional[str] = None) -> None:
        """A new user message (turn ``id``, if it has one); a known id changes nothing.
        Raises ``TurnError`` when the session holds the most latched turns it may."""
    def judge(self, policy: Source, request: Request, turn: Optional[str] = None, batch: Optional[str] = None, *, spend: bool = True) -> Response:
        """Judges the batch as a call of ``turn`` (default: the request's ``turn``, else the
        current turn) with the turn's latches and the session's recorded calls merged into
        the executor's facts, and records the latches it set; ``decide``'s response.
        ``batch`` keeps the verdicts for ``decision`` (judged again, the kept response is
        returned, and counted once). A budget over batches is judged with the counts the turn
        state keeps: ``per turn`` and ``per session`` in this session, ``per principal`` and
        ``per tenant`` (by ``facts.principal``'s ``sub`` and ``tenant``) in a book every
        ``TurnState`` of the process shares; the response's ``spent`` is added to them under
        the same lock. Counts are per process and start from zero when it starts.
        ``spend=False`` is for a judgement no call runs on (a pre-scan, a preview): judged
        with the counts, it adds nothing, and its allowing verdicts are not kept for
        ``decision``. Raises
        ``RequestError`` (also for a request that brings its own ``facts.spent``) or
        ``TurnError``."""
    def decision(
        self, policy: Source, call_id: str, tool: str, args: Union[Mapping[str, Any], str, bytes], turn: Optional[str] = None, batch: Optional[str] = None
    ) -> Optional[Decision]:
        """The kept decision of this very call in batch ``batch`` (default: the batch judged
        last) of ``turn``, given once; ``None`` if it was not judged so, was given already,
        or a latch changed since."""
    def record_output(self, policy: Source, call_id: str, tool: str, output: Any, turn: Optional[str] = None) -> None:
        """Records the output of call ``call_id`` of ``tool`` in ``turn``, sent as
        ``facts.outputs`` with the turn's later batches. Until every allowed call whose output
        the policy reads as untrusted has its output recorded, none is sent, and a check that
        reads them denies."""
    def set_prompt(self, prompt: str, turn: Optional[str] = None) -> bool:
        """Keeps the user's message of ``turn`` (default: the current turn), sent as
        ``facts.prompt`` with its later batches, only if ``turn`` is the session's current
        turn, checked and kept under the state's lock; whether it was kept. A late message of
        an earlier turn, or of an id the state does not know, is refused. Never starts a
        turn."""
    def record_call(self, tool: str, ok: bool = True, turn: Optional[str] = None) -> None:
        """Records that ``tool`` ran in ``turn`` (undated if the turn is unknown)."""
    def latches(self, policy: Source, turn: Optional[str] = None) -> LatchState:
        """The latches a call of ``turn`` would be judged with now, in a response's shape."""
    def recorded(self, policy: Source, turn: Optional[str] = None) -> List[Dict[str, Any]]:
        """The calls recorded in ``turn``, as ``{"tool", "ok"}``."""
    @property
    def latched(self) -> LatchState:
        """The current turn's latches as stored."""
    @property
    def turns(self) -> int:
        """The number of the most recent turn (0 before any signal)."""
    @property
    def called(self) -> List[Dict[str, Any]]:
        """Every recorded call as a ``facts.called`` entry, dated against the current turn."""

def compile(source: str, filename: str = "policy.gate") -> Policy:
    """Compiles policy text; imports: ``stdlib::`` only. Raises ``CompileError``."""

def load(path: Union[str, "os.PathLike[str]"]) -> Policy:
    """Reads and compiles a policy file, ``use "FILE"`` imports relative to it."""
