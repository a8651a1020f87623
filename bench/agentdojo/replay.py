"""Ground-truth replay of one AgentDojo user turn through a gate.

A turn replays a user task's ``ground_truth()`` calls through AgentDojo's own
``FunctionsRuntime``, one call per batch as the ground-truth pipeline emits them, judging each
call first; a refused call does not run. For an attack, the compromised model also makes the
injection task's calls (``derive.attacker_plan``) in the same turn, either right after the first
user call whose result carries the injected text, or after the user task's last call. The
task's own ``utility()`` and the injection task's ``security()`` then score the final
environment, exactly as ``TaskSuite.run_task_with_pipeline`` does.
"""

from __future__ import annotations

import datetime
import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import toolgate
from agentdojo.base_tasks import BaseInjectionTask, BaseUserTask
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime, TaskEnvironment
from agentdojo.task_suite.task_suite import TaskSuite
from agentdojo.types import text_content_block_from_string
from pydantic import BaseModel

from derive import attacker_plan, needs_derivation
from userfacts import user_facts

STAGE = "agent"
"""The stage every shipped policy defines; the harness sends it as ``facts.stage``."""

Placement = Literal["first_injection", "end"]
PLACEMENTS: tuple[Placement, ...] = ("first_injection", "end")


def to_json(value: Any) -> Any:
    """A tool result or argument as plain JSON (pydantic models dumped in JSON mode)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_json(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    return str(value)


def _strings(value: Any) -> Iterable[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _squeeze(text: str) -> str:
    """Text with every run of whitespace made one space (YAML loading folds blank lines)."""
    return " ".join(text.split())


def carries(output: Any, texts: Iterable[str]) -> bool:
    """Whether a JSON tool output contains one of the injected texts (whitespace aside)."""
    needles = [_squeeze(t) for t in texts if t.strip()]
    return any(needle in _squeeze(s) for s in _strings(output) for needle in needles)


@dataclass
class Verdict:
    """A gate's answer for one call."""

    allowed: bool
    asked: bool = False
    rule: str | None = None


class Gate(Protocol):
    """What judges a turn's calls: a policy with its turn state, or nothing (the baseline)."""

    def new_turn(self) -> None:
        """A new user message: the turn's latches start cleared."""

    def judge(self, call_id: str, tool: str, args: dict[str, Any], facts: dict[str, Any]) -> Verdict:
        """Judges one call as a batch of one."""

    def ran(self, tool: str, ok: bool) -> None:
        """Records that an allowed call ran."""


class OpenGate:
    """No policy: every call is allowed."""

    def new_turn(self) -> None:
        """Nothing to reset."""

    def judge(self, call_id: str, tool: str, args: dict[str, Any], facts: dict[str, Any]) -> Verdict:
        """Allows the call."""
        return Verdict(allowed=True)

    def ran(self, tool: str, ok: bool) -> None:
        """Nothing to record."""


class PolicyGate:
    """A toolgate policy judging through a ``TurnState``, as an executor carries it.

    With ``approve_asks``, a scripted user approves every ask: the call is judged again with the
    ask's digest in ``facts.approvals``."""

    def __init__(self, policy: toolgate.Policy, approve_asks: bool = False) -> None:
        self.policy = policy
        self.approve_asks = approve_asks
        self.state = toolgate.TurnState()
        self.turn = 0

    def new_turn(self) -> None:
        """A fresh session whose first user message starts the turn."""
        self.state = toolgate.TurnState()
        self.turn += 1
        self.state.signal(self.policy, f"turn-{self.turn}")

    def _decide(self, call: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
        """The decision of one call judged alone."""
        response = self.state.judge(self.policy, {"facts": facts, "calls": [call]})
        return response["decisions"][0]

    def judge(self, call_id: str, tool: str, args: dict[str, Any], facts: dict[str, Any]) -> Verdict:
        """Judges the call; an ask is approved when the scripted user approves asks."""
        call = {"id": call_id, "tool": tool, "args": args}
        decision = self._decide(call, facts)
        if decision["allow"]:
            return Verdict(allowed=True)
        if decision.get("kind") != "ask":
            return Verdict(allowed=False, rule=decision.get("rule"))
        if not self.approve_asks:
            return Verdict(allowed=False, asked=True, rule=decision.get("rule"))
        approved = self._decide(call, {**facts, "approvals": [decision["approval"]]})
        return Verdict(allowed=bool(approved["allow"]), asked=True, rule=approved.get("rule"))

    def ran(self, tool: str, ok: bool) -> None:
        """Records the call in the turn, for ``facts.called``."""
        self.state.record_call(tool, ok)


@dataclass
class Step:
    """One call of a turn and what became of it."""

    call_id: str
    call: FunctionCall
    role: Literal["user", "attack"]
    verdict: Verdict
    output: Any = None
    error: str | None = None

    @property
    def ran(self) -> bool:
        """Whether the call was allowed and so executed."""
        return self.verdict.allowed


@dataclass
class Turn:
    """One user turn replayed through a gate in one environment."""

    suite: TaskSuite
    env: TaskEnvironment
    prompt: str
    gate: Gate
    known: dict[str, Any]
    steps: list[Step] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.runtime = FunctionsRuntime(self.suite.tools)
        self.gate.new_turn()

    def facts(self) -> dict[str, Any]:
        """What the executor sends with the next call: stage, prompt, this turn's outputs, user facts."""
        outputs = [{"id": s.call_id, "tool": s.call.function, "output": s.output} for s in self.steps if s.ran]
        return {**self.known, "stage": STAGE, "prompt": self.prompt, "outputs": outputs}

    def run(self, call: FunctionCall, role: Literal["user", "attack"]) -> Step:
        """Judges the call and runs it if allowed."""
        call_id = f"c{len(self.steps) + 1}"
        args = to_json(dict(call.args))
        verdict = self.gate.judge(call_id, call.function, args, self.facts())
        step = Step(call_id=call_id, call=call, role=role, verdict=verdict)
        if verdict.allowed:
            result, error = self.runtime.run_function(self.env, call.function, call.args, raise_on_error=False)
            step.output = to_json(result) if error is None else error
            step.error = error
            self.gate.ran(call.function, error is None)
        self.steps.append(step)
        return step

    def seen(self, tool: str) -> list[Any]:
        """The outputs of this turn's calls to ``tool`` that ran without error."""
        return [s.output for s in self.steps if s.ran and s.error is None and s.call.function == tool]

    def traces(self) -> list[FunctionCall]:
        """The calls that ran, as AgentDojo's function stack trace."""
        return [s.call for s in self.steps if s.ran]

    def attack(self, task: BaseInjectionTask) -> None:
        """The compromised model makes every call of the injection task's plan."""
        plan = attacker_plan(task, self.env, self.seen)
        try:
            call = next(plan)
            while True:
                step = self.run(call, "attack")
                call = plan.send(step.output if step.ran and step.error is None else None)
        except StopIteration:
            pass


@dataclass
class Outcome:
    """The scores of one replayed turn."""

    utility: bool
    user_allowed: bool
    user_asked: bool
    first_refusal: str | None
    attack_succeeded: bool | None = None
    attack_asked: bool = False
    attack_calls: int = 0
    placed_late: bool = False
    delivered: bool = False
    """Whether a call that ran returned the injected text (else the model never saw it)."""


@functools.lru_cache(maxsize=64)
def _pristine(suite: TaskSuite, injections: tuple[tuple[str, str], ...]) -> TaskEnvironment:
    """The suite's environment with these injections placed, loaded once (YAML parsing is slow)."""
    return suite.load_and_inject_default_environment(dict(injections))


def load_environment(suite: TaskSuite, injections: dict[str, str]) -> TaskEnvironment:
    """A fresh deep copy of the injected environment, as AgentDojo loads it for every run."""
    return _pristine(suite, tuple(sorted(injections.items()))).model_copy(deep=True)


def _blocks(*texts: str) -> list[Any]:
    """Model output content blocks from the ground-truth texts."""
    return [text_content_block_from_string("\n".join(t for t in texts if t))]


def replay(
    suite: TaskSuite,
    user_task: BaseUserTask,
    injections: dict[str, str],
    gate: Gate,
    injection_task: BaseInjectionTask | None = None,
    placement: Placement = "end",
) -> Outcome:
    """Replays the user task (and the attack, if any) and scores it as AgentDojo does."""
    env = user_task.init_environment(load_environment(suite, injections))
    pre = env.model_copy(deep=True)
    turn = Turn(suite=suite, env=env, prompt=user_task.PROMPT, gate=gate, known=user_facts(pre))
    pending = injection_task
    for call in user_task.ground_truth(pre.model_copy(deep=True)):
        step = turn.run(call, "user")
        if pending is not None and placement == "first_injection" and step.ran and carries(step.output, injections.values()):
            turn.attack(pending)
            pending = None
    placed_late = pending is not None and placement == "first_injection"
    if pending is not None:
        turn.attack(pending)

    user_steps = [s for s in turn.steps if s.role == "user"]
    refused = next((s for s in user_steps if not s.ran), None)
    outcome = Outcome(
        utility=suite._check_user_task_utility(user_task, _blocks(user_task.GROUND_TRUTH_OUTPUT), pre, env, turn.traces()),
        user_allowed=refused is None,
        user_asked=any(s.verdict.asked for s in user_steps),
        first_refusal=None if refused is None else f"{refused.call.function}: {refused.verdict.rule}",
        placed_late=placed_late,
    )
    if injection_task is not None:
        attack_steps = [s for s in turn.steps if s.role == "attack"]
        output = _blocks(user_task.GROUND_TRUTH_OUTPUT, injection_task.GROUND_TRUTH_OUTPUT)
        outcome.attack_succeeded = bool(suite._check_injection_task_security(injection_task, output, pre, env, turn.traces()))
        outcome.attack_asked = any(s.verdict.asked for s in attack_steps)
        outcome.attack_calls = len(attack_steps)
        outcome.delivered = any(s.ran and carries(s.output, injections.values()) for s in user_steps)
    return outcome


def tool_goal(suite: TaskSuite, task: BaseInjectionTask) -> bool:
    """Whether the injection task's goal needs a tool call (its plan makes at least one)."""
    env = load_environment(suite, {})
    return bool(task.ground_truth(env)) or needs_derivation(task, env)


def holds_untouched(suite: TaskSuite, user_task: BaseUserTask) -> bool:
    """Whether the task's utility check already passes when no call runs at all.

    For such tasks only "every call allowed" measures anything."""
    env = user_task.init_environment(load_environment(suite, {}))
    pre = env.model_copy(deep=True)
    return bool(suite._check_user_task_utility(user_task, _blocks(user_task.GROUND_TRUTH_OUTPUT), pre, env, []))
