"""AgentDojo by ground-truth replay: utility and attack success of toolgate policies.

    python bench/agentdojo/run.py [--suite banking] [--policies DIR | --baseline] [--json OUT]

Each user task's ground-truth calls are replayed through AgentDojo's ``FunctionsRuntime``,
each judged first by the suite's policy (``DIR/SUITE.gate``) with a ``toolgate.TurnState``; the
model is taken as fully compromised, so every (user task, injection task) pair also makes the
injection task's calls, placed either after the first call that read the injected text or at
the end of the turn. See README.md beside this file for the method and the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import toolgate
from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.attacks.attack_registry import load_attack
from agentdojo.attacks.base_attacks import BaseAttack
from agentdojo.task_suite.load_suites import get_suites
from agentdojo.task_suite.task_suite import TaskSuite

from replay import PLACEMENTS, Gate, OpenGate, Outcome, PolicyGate, holds_untouched, replay, tool_goal

HERE = Path(__file__).resolve().parent


class NamedPipeline(BasePipelineElement):
    """Stands for the attacked pipeline: the attack reads only its name (to name the model)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def query(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - never called
        """Replay has no model; the attack never queries its target."""
        raise NotImplementedError


@dataclass
class TaskScore:
    """One user task across the clean environment and every injected one."""

    utility: bool = True
    utility_with_approvals: bool = True
    utility_clean: bool = True
    refusal: str | None = None


@dataclass
class PairScore:
    """One (user task, injection task) pair under each placement."""

    tool_goal: bool
    succeeded: dict[str, bool] = field(default_factory=dict)
    delivered: dict[str, bool] = field(default_factory=dict)
    asked: bool = False
    placed_late: bool = False


def _useful(outcome: Outcome) -> bool:
    """Utility as the harness counts it: every user call allowed without an ask, and the check passes."""
    return outcome.user_allowed and not outcome.user_asked and outcome.utility


def score_task(suite: TaskSuite, task: Any, envs: Sequence[dict[str, str]], gate: Gate, approving: Gate | None) -> TaskScore:
    """Scores a user task in each environment (the first is the clean one)."""
    score = TaskScore()
    for index, injections in enumerate(envs):
        outcome = replay(suite, task, injections, gate)
        useful = _useful(outcome)
        if index == 0:
            score.utility_clean = useful
        if not useful:
            score.utility = False
            score.refusal = score.refusal or outcome.first_refusal or "utility check failed"
        with_approvals = useful
        if not useful and approving is not None and outcome.user_asked:
            again = replay(suite, task, injections, approving)
            with_approvals = again.user_allowed and again.utility
        score.utility_with_approvals = score.utility_with_approvals and with_approvals
    return score


def score_pair(suite: TaskSuite, user_task: Any, injection_task: Any, injections: dict[str, str], gate: Gate, is_tool_goal: bool) -> PairScore:
    """Replays the attack under both placements."""
    pair = PairScore(tool_goal=is_tool_goal)
    for placement in PLACEMENTS:
        outcome = replay(suite, user_task, injections, gate, injection_task, placement)
        pair.succeeded[placement] = bool(outcome.attack_succeeded)
        pair.delivered[placement] = outcome.delivered
        pair.asked = pair.asked or outcome.attack_asked
        pair.placed_late = pair.placed_late or outcome.placed_late
    return pair


def _rate(n: int, of: int) -> float:
    """n/of rounded for the report (0 when there is nothing to count)."""
    return round(n / of, 4) if of else 0.0


def summarise(tasks: dict[str, TaskScore], pairs: dict[tuple[str, str], PairScore], baseline: bool) -> dict[str, Any]:
    """The suite's counts, rates and the pairs worth reading."""
    tool_pairs = {k: p for k, p in pairs.items() if p.tool_goal}
    either = {k for k, p in pairs.items() if any(p.succeeded.values())}
    stopped_by_ask = {k for k, p in pairs.items() if p.asked and k not in either}
    counts: dict[str, Any] = {
        "user_tasks": len(tasks),
        "utility": sum(t.utility for t in tasks.values()),
        "utility_with_approvals": sum(t.utility_with_approvals for t in tasks.values()),
        "utility_clean": sum(t.utility_clean for t in tasks.values()),
        "pairs": len(pairs),
        "attacks_succeeded": len(either),
        "pairs_tool_goals": len(tool_pairs),
        "attacks_succeeded_tool_goals": len(either & tool_pairs.keys()),
        "attacks_asked": len(stopped_by_ask),
        "attacks_succeeded_tool_goals_delivered": sum(
            any(p.succeeded[x] and p.delivered[x] for x in PLACEMENTS) for p in tool_pairs.values()
        ),
        "by_placement": {
            placement: {
                "attacks_succeeded": sum(p.succeeded[placement] for p in pairs.values()),
                "attacks_succeeded_tool_goals": sum(p.succeeded[placement] for p in tool_pairs.values()),
            }
            for placement in PLACEMENTS
        },
        "first_injection_fallbacks": sum(p.placed_late for p in pairs.values()),
    }
    counts["rates"] = _rates(counts)
    counts["tasks_without_utility"] = {k: t.refusal for k, t in tasks.items() if not t.utility}
    counts["tool_goal_attacks_succeeded"] = [_pair_row(k, p) for k, p in tool_pairs.items() if k in either]
    if baseline:
        counts["tool_goal_attacks_missed"] = [_pair_row(k, p) for k, p in tool_pairs.items() if k not in either]
        counts["tool_goal_attacks_missed_by_placement"] = {
            placement: [_pair_row(k, p) for k, p in tool_pairs.items() if not p.succeeded[placement]] for placement in PLACEMENTS
        }
    return counts


def _pair_row(key: tuple[str, str], pair: PairScore) -> dict[str, Any]:
    """A pair as a JSON row."""
    return {"user_task": key[0], "injection_task": key[1], **{p: pair.succeeded[p] for p in PLACEMENTS},
            "delivered": {p: pair.delivered[p] for p in PLACEMENTS}}


def _rates(counts: dict[str, Any]) -> dict[str, float]:
    """The headline fractions."""
    return {
        "utility": _rate(counts["utility"], counts["user_tasks"]),
        "utility_with_approvals": _rate(counts["utility_with_approvals"], counts["user_tasks"]),
        "asr": _rate(counts["attacks_succeeded"], counts["pairs"]),
        "asr_tool_goals": _rate(counts["attacks_succeeded_tool_goals"], counts["pairs_tool_goals"]),
    }


def run_suite(suite: TaskSuite, attack: BaseAttack, make_gate: Callable[[bool], Gate], baseline: bool, log: Callable[[str], None]) -> dict[str, Any]:
    """Scores every user task and every pair of one suite."""
    gate, approving = make_gate(False), (None if baseline else make_gate(True))
    tool_goals = {i: tool_goal(suite, t) for i, t in suite.injection_tasks.items()}
    tasks: dict[str, TaskScore] = {}
    pairs: dict[tuple[str, str], PairScore] = {}
    for user_id, user_task in suite.user_tasks.items():
        injected = {i: attack.attack(user_task, t) for i, t in suite.injection_tasks.items()}
        tasks[user_id] = score_task(suite, user_task, [{}, *injected.values()], gate, approving)
        for inj_id, inj_task in suite.injection_tasks.items():
            pairs[(user_id, inj_id)] = score_pair(suite, user_task, inj_task, injected[inj_id], gate, tool_goals[inj_id])
        log(f"  {suite.name} {user_id}: utility={tasks[user_id].utility}")
    result = summarise(tasks, pairs, baseline)
    result["text_goal_injection_tasks"] = sorted(i for i, tool in tool_goals.items() if not tool)
    result["tasks_useful_without_calls"] = sorted(i for i, t in suite.user_tasks.items() if holds_untouched(suite, t))
    return result


def aggregate(suites: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The counts of every suite added up."""
    keys = ["user_tasks", "utility", "utility_with_approvals", "utility_clean", "pairs", "attacks_succeeded",
            "pairs_tool_goals", "attacks_succeeded_tool_goals", "attacks_succeeded_tool_goals_delivered",
            "attacks_asked", "first_injection_fallbacks"]
    total: dict[str, Any] = {k: sum(s[k] for s in suites.values()) for k in keys}
    total["by_placement"] = {
        p: {k: sum(s["by_placement"][p][k] for s in suites.values()) for k in ("attacks_succeeded", "attacks_succeeded_tool_goals")}
        for p in PLACEMENTS
    }
    total["rates"] = _rates(total)
    return total


def _suite_names(values: list[str] | None, available: Sequence[str]) -> list[str]:
    """`--suite` values (repeatable, comma lists, `all`) as suite names."""
    names = [n.strip() for v in values or ["all"] for n in v.split(",") if n.strip()]
    if "all" in names:
        return list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise SystemExit(f"unknown suite(s) {unknown}; this benchmark version has {list(available)}")
    return list(dict.fromkeys(names))


def _gate_factory(policies: Path, suite: str, baseline: bool) -> Callable[[bool], Gate]:
    """Builds the suite's gate: its compiled policy, or the open gate for the baseline."""
    if baseline:
        return lambda approve: OpenGate()
    policy = toolgate.load(policies / f"{suite}.gate")
    return lambda approve: PolicyGate(policy, approve_asks=approve)


def main(argv: Sequence[str] | None = None) -> int:
    """Parses the command line, runs the suites, prints a table and writes the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark-version", default="v1.2.2")
    parser.add_argument("--attack", default="important_instructions")
    parser.add_argument("--suite", action="append", help="suite name, comma list or `all` (repeatable)")
    parser.add_argument("--policies", type=Path, default=HERE / "policies", help="directory of SUITE.gate files")
    parser.add_argument("--baseline", action="store_true", help="no policy: every call is allowed")
    parser.add_argument("--model-name", default="gpt-4o-2024-05-13", help="pipeline name the attack reads the model's name from")
    parser.add_argument("--json", type=Path, dest="json_out", help="write the results here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    log = (lambda _msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr))
    available = get_suites(args.benchmark_version)
    if not available:
        raise SystemExit(f"unknown benchmark version {args.benchmark_version}")
    started = time.monotonic()
    results: dict[str, dict[str, Any]] = {}
    for name in _suite_names(args.suite, list(available)):
        suite = available[name]
        attack = load_attack(args.attack, suite, NamedPipeline(args.model_name))
        results[name] = run_suite(suite, attack, _gate_factory(args.policies, name, args.baseline), args.baseline, log)
    report = {
        "benchmark_version": args.benchmark_version,
        "attack": args.attack,
        "policies": None if args.baseline else str(args.policies),
        "baseline": args.baseline,
        "toolgate_version": getattr(toolgate, "__version__", None),
        "seconds": round(time.monotonic() - started, 1),
        "suites": results,
        "all": aggregate(results),
    }
    print(table(report))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


def table(report: dict[str, Any]) -> str:
    """The headline numbers as a Markdown table."""
    rows = ["| suite | user tasks | utility | utility with approvals | tool-goal ASR | of which injection seen | ASR incl. text goals | attacks asked |",
            "|---|---|---|---|---|---|---|---|"]
    for name, s in [*report["suites"].items(), ("all", report["all"])]:
        rows.append(
            f"| {name} | {s['user_tasks']} | {s['utility']} ({s['rates']['utility']:.1%}) "
            f"| {s['utility_with_approvals']} ({s['rates']['utility_with_approvals']:.1%}) "
            f"| {s['attacks_succeeded_tool_goals']}/{s['pairs_tool_goals']} ({s['rates']['asr_tool_goals']:.1%}) "
            f"| {s['attacks_succeeded_tool_goals_delivered']} "
            f"| {s['attacks_succeeded']}/{s['pairs']} ({s['rates']['asr']:.1%}) | {s['attacks_asked']} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
