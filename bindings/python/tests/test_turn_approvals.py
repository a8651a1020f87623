"""`Turn`'s approvals (issue 24): a person's approval of an ask's digest, stamped with a
monotonic clock, sent in `facts.approvals` while it is live, dropped once it let a call run
or once it is older than the policy's `approval_window`, and gone with its turn."""

import threading

import pytest

import toolgate
from toolgate.adapters.turn import Gate, Turn

ASKS = """module desk
write refund
read lookup_order
stage main { tools [refund, lookup_order] }
approvals { valid_for 1s }
rule refunds for refund {
  require args.amount is number and args.amount <= 500
  ask when args.amount > 50
}
"""


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def policy():
    return toolgate.compile(ASKS, "desk.gate")


def asked(decision):
    assert (decision["allow"], decision["kind"]) == (False, "ask"), decision
    return decision["approval"]


def test_an_approval_lets_exactly_one_identical_call_run_and_the_next_asks_again(policy):
    turn = Turn(policy, {"stage": "main"})
    digest = asked(turn.judge_one("refund", {"amount": 80}))
    turn.approve(digest)
    assert turn.approvals == [digest]
    allowed = turn.judge_one("refund", {"amount": 80})
    assert allowed["allow"] and allowed["approval"] == digest
    assert turn.approvals == [], "used once, the approval is gone"
    assert asked(turn.judge_one("refund", {"amount": 80})) == digest


def test_an_approval_for_other_arguments_does_not_allow_and_is_kept(policy):
    turn = Turn(policy, {"stage": "main"})
    digest = asked(turn.judge_one("refund", {"amount": 80}))
    turn.approve(digest)
    assert asked(turn.judge_one("refund", {"amount": 90})) != digest
    assert turn.approvals == [digest]
    assert turn.judge_one("refund", {"amount": 80})["allow"]


def test_an_approval_older_than_the_window_is_never_sent(policy):
    clock = Clock()
    turn = Turn(policy, {"stage": "main"}, clock=clock)
    digest = asked(turn.judge_one("refund", {"amount": 80}))
    turn.approve(digest)
    clock.now += 0.9
    assert turn.approvals == [digest]
    clock.now += 0.2  # 1.1 s after the approval: past `valid_for 1s`
    assert turn.approvals == []
    assert asked(turn.judge_one("refund", {"amount": 80})) == digest


def test_an_approval_within_the_window_is_used(policy):
    clock = Clock()
    turn = Turn(policy, {"stage": "main"}, clock=clock)
    digest = asked(turn.judge_one("refund", {"amount": 80}))
    turn.approve(digest)
    clock.now += 0.5
    assert turn.judge_one("refund", {"amount": 80})["allow"]


def test_a_batch_of_two_identical_calls_runs_one_with_one_approval(policy):
    turn = Turn(policy, {"stage": "main"})
    digest = asked(turn.judge_one("refund", {"amount": 80}))
    turn.approve(digest)
    first, second = turn.judge([{"id": "a", "tool": "refund", "args": {"amount": 80}}, {"id": "b", "tool": "refund", "args": {"amount": 80}}])
    assert first["allow"] and asked(second) == digest
    assert turn.approvals == []


def test_approvals_belong_to_their_turn(policy):
    gate = Gate(policy, facts={"stage": "main"})
    turn = gate.turn("s")
    digest = asked(turn.judge_one("refund", {"amount": 80}))
    turn.approve(digest)
    later = gate.start_turn("s")
    assert later.approvals == []
    assert asked(later.judge_one("refund", {"amount": 80})) == digest
    assert gate.turn("s", epoch=turn.id).judge_one("refund", {"amount": 80})["allow"], "the asking turn keeps its own"


def test_a_rejection_refuses_the_call_with_the_reason_without_asking_again(policy):
    turn = Turn(policy, {"stage": "main"})
    digest = asked(turn.judge_one("refund", {"amount": 80}))
    refusal = turn.reject(digest, "not without a receipt")
    for d in (refusal, turn.judge_one("refund", {"amount": 80})):
        assert (d["allow"], d["kind"], d["rule"], d["approval"]) == (False, "rejected", "refunds", digest)
        assert "declined" in d["reason"] and "NOT run" in d["reason"] and "not without a receipt" in d["reason"]
    assert asked(turn.judge_one("refund", {"amount": 90})), "another call still asks"


def test_an_approval_after_a_rejection_lets_the_call_run(policy):
    turn = Turn(policy, {"stage": "main"})
    digest = asked(turn.judge_one("refund", {"amount": 80}))
    turn.reject(digest)
    turn.approve(digest)
    assert turn.judge_one("refund", {"amount": 80})["allow"]


def test_a_digest_that_is_not_one_is_refused(policy):
    turn = Turn(policy, {"stage": "main"})
    for bad in ("", "ap1:xyz", "ap2:" + "0" * 64, None):
        with pytest.raises((ValueError, TypeError)):
            turn.approve(bad)


def test_approvals_the_executor_passes_in_facts_are_the_turns_and_used_once(policy):
    digest = asked(Turn(policy, {"stage": "main"}).judge_one("refund", {"amount": 80}))
    turn = Turn(policy, {"stage": "main", "approvals": [digest]})
    assert turn.approvals == [digest]
    assert turn.judge_one("refund", {"amount": 80})["allow"]
    asked(turn.judge_one("refund", {"amount": 80}))


def test_a_verdict_kept_from_a_batch_judged_before_the_approval_is_not_served_as_an_ask(policy):
    turn = Turn(policy, {"stage": "main"})
    [d] = turn.judge_batch_once("m1", [{"id": "c1", "tool": "refund", "args": {"amount": 80}}])
    turn.approve(asked(d))
    kept = turn.batch_decision("c1", "refund", {"amount": 80}, batch_id="m1")
    decision = kept or turn.judge_one("refund", {"amount": 80}, "c1")
    assert decision["allow"]


def test_an_approval_is_used_once_across_threads(policy):
    turn = Turn(policy, {"stage": "main"})
    turn.approve(asked(turn.judge_one("refund", {"amount": 80})))
    results, start = [], threading.Barrier(8)

    def judge():
        start.wait()
        results.append(turn.judge_one("refund", {"amount": 80})["allow"])

    threads = [threading.Thread(target=judge) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 7 + [True]
