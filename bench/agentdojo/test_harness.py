"""Fast checks of the replay harness's parts (run: python -m pytest bench/agentdojo)."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

import toolgate
from agentdojo.task_suite.load_suites import get_suites

sys.path.insert(0, str(Path(__file__).resolve().parent))

from derive import attacker_plan, is_text_goal, needs_derivation  # noqa: E402
from replay import OpenGate, PolicyGate, carries, load_environment, replay, to_json  # noqa: E402
from userfacts import user_facts  # noqa: E402

HERE = Path(__file__).resolve().parent
SUITES = get_suites("v1.2.2")


def test_to_json_plain() -> None:
    """Pydantic models, dates and tuples become plain JSON; strings stay strings."""
    workspace = SUITES["workspace"]
    email = load_environment(workspace, {}).inbox.received[0]
    dumped = to_json([email, datetime.date(2024, 5, 15), ("a", 1), "text"])
    assert dumped[0]["id_"] == email.id_ and isinstance(dumped[0]["timestamp"], str)
    assert dumped[1:] == ["2024-05-15", ["a", 1], "text"]


def test_carries_ignores_folded_whitespace() -> None:
    """YAML folds blank lines; the injected text is still found."""
    assert carries({"body": "x\nHello there\nfriend y"}, ["\n\nHello there\n\n\nfriend"])
    assert not carries(["unrelated"], ["Hello"])


def test_user_facts_come_from_structured_fields() -> None:
    """Banking facts: the account's own IBAN and its payees, never free text."""
    env = load_environment(SUITES["banking"], {})
    facts = user_facts(env)
    assert facts["own_iban"] == env.bank_account.iban
    assert facts["payees"] and facts["own_iban"] not in facts["payees"]


def test_payees_include_the_accounts_own_past_payments() -> None:
    """The environment records the account's own past payments with sender "me", not its
    IBAN: their recipients are payees too (they were missing, so a refund to someone the
    account had paid before asked)."""
    account = load_environment(SUITES["banking"], {}).bank_account
    facts = user_facts(load_environment(SUITES["banking"], {}))
    sent = [t.recipient for t in account.transactions if t.sender in ("me", account.iban)]
    assert any(t.sender == "me" for t in account.transactions)
    assert sent and all(r in facts["payees"] for r in sent)
    received = [t.sender for t in account.transactions if t.recipient == "me"]
    assert all(s in sent or s not in facts["payees"] for s in received)


def test_empty_ground_truths_are_derived_or_text_goals() -> None:
    """Every injection task with no ground truth is either a text goal or gets a derived plan."""
    for suite in SUITES.values():
        env = load_environment(suite, {})
        for task in suite.injection_tasks.values():
            if task.ground_truth(env):
                continue
            assert is_text_goal(task, env) or needs_derivation(task, env)
            if needs_derivation(task, env):
                first = next(attacker_plan(task, env, lambda _tool: []))
                assert first.function  # the plan starts with a call


def test_latch_blocks_a_write_after_an_ingest() -> None:
    """A policy judged through TurnState refuses banking's bill payment after read_file."""
    banking = SUITES["banking"]
    task = banking.user_tasks["user_task_0"]
    gate = PolicyGate(toolgate.load(HERE / "policies" / "banking.gate"))
    assert not replay(banking, task, {}, gate).user_allowed
    assert replay(banking, task, {}, OpenGate()).utility
