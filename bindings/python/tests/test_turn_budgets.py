"""Budgets over batches in the in-process `TurnState` (issue 26): `per turn` and `per session`
counts in the session's state, `per principal` and `per tenant` counts shared by every
`TurnState` of the process, checked and consumed under one lock per batch."""

import threading
import time
import uuid

import pytest

import toolgate

SHOP = """module shop
write refund, send
ingest fetch
stage main { tools [refund, send, fetch] }
latch tainted { set_by [fetch] blocks [send] }
budget refunds for refund { sum args.amount <= 100 per session }
budget sends for send { count <= 2 per turn }
"""

DAILY = """module daily
write refund
stage main { tools [refund] }
budget daily for refund { count <= 3 within 24h per principal }
"""

SLIDING = """module sliding
write refund
stage main { tools [refund] }
budget quick for refund { count <= 1 within 1s per principal }
"""


def who():
    """A principal no other test uses: the process's book is shared by every test."""
    return f"p-{uuid.uuid4().hex}"


def batch(*calls, principal=None):
    facts = {"stage": "main"}
    if principal is not None:
        facts["principal"] = {"sub": principal, "tenant": "acme"}
    return {"facts": facts, "calls": [{"id": f"c{i}", "tool": t, "args": a} for i, (t, a) in enumerate(calls)]}


def allowed(response):
    return [d["allow"] for d in response["decisions"]]


@pytest.fixture
def shop():
    return toolgate.compile(SHOP, "shop.gate")


def test_a_sessions_sum_spans_batches_and_the_denial_says_what_is_left(shop):
    state = toolgate.TurnState()
    for _ in range(2):
        response = state.judge(shop, batch(("refund", {"amount": 40})))
        assert allowed(response) == [True]
        assert response["spent"] == {"refunds": 40}
    [third] = state.judge(shop, batch(("refund", {"amount": 40})))["decisions"]
    assert (third["allow"], third["kind"], third["rule"]) == (False, "budget", "refunds")
    assert "20 of 100 left per session" in third["reason"], third["reason"]
    assert allowed(toolgate.TurnState().judge(shop, batch(("refund", {"amount": 40})))) == [True], "another session counts on its own"


def test_a_turns_count_starts_again_in_a_new_turn(shop):
    state = toolgate.TurnState()
    sends = [("send", {})] * 3
    assert allowed(state.judge(shop, batch(*sends), "t1")) == [True, True, False]
    assert allowed(state.judge(shop, batch(*sends), "t2")) == [True, True, False]
    assert allowed(state.judge(shop, batch(("send", {})), "t1")) == [False], "t1 spent its two"


def test_a_principals_count_is_shared_by_two_turn_states_and_not_by_another_principal():
    daily = toolgate.compile(DAILY, "daily.gate")
    ana, ben = who(), who()
    one, two = toolgate.TurnState(), toolgate.TurnState()
    refund = ("refund", {"amount": 1})
    assert allowed(one.judge(daily, batch(refund, refund, principal=ana))) == [True, True]
    assert allowed(two.judge(daily, batch(refund, refund, principal=ana))) == [True, False]
    [denied] = two.judge(daily, batch(refund, principal=ana))["decisions"]
    assert denied["kind"] == "budget" and "0 of 3 left per principal;" in denied["reason"], denied
    assert allowed(two.judge(daily, batch(refund, principal=ben))) == [True], "ben has his own count"


def test_a_window_slides():
    sliding = toolgate.compile(SLIDING, "sliding.gate")
    ana = who()
    state = toolgate.TurnState()
    refund = ("refund", {"amount": 1})
    start = time.monotonic()
    assert allowed(state.judge(sliding, batch(refund, principal=ana))) == [True]
    again = allowed(state.judge(sliding, batch(refund, principal=ana)))
    if time.monotonic() - start < 1.0:
        # Only asserted when the machine did not stall past the window in between.
        assert again == [False]
    time.sleep(1.2)
    assert allowed(state.judge(sliding, batch(refund, principal=ana))) == [True], "the window slid"


def test_concurrent_batches_from_threads_never_exceed_the_limit():
    daily = toolgate.compile(DAILY, "daily.gate")
    dee = who()
    states = [toolgate.TurnState() for _ in range(3)]
    ran = []
    start = threading.Barrier(12)

    def work(i):
        start.wait()
        # Text over the size that releases the GIL, so the judgements really overlap.
        padding = {"note": "x" * 70_000}
        response = states[i % 3].judge(daily, batch(("refund", padding), ("refund", {}), principal=dee))
        ran.append(sum(allowed(response)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(ran) == 3, ran


def test_a_non_number_amount_is_denied_and_consumes_nothing(shop):
    state = toolgate.TurnState()
    response = state.judge(shop, batch(("refund", {"amount": "40"}), ("refund", {})))
    assert [(d["allow"], d["kind"]) for d in response["decisions"]] == [(False, "budget"), (False, "budget")]
    assert allowed(state.judge(shop, batch(("refund", {"amount": 100})))) == [True], "nothing was spent"


def test_a_principals_budget_without_a_principal_denies():
    daily = toolgate.compile(DAILY, "daily.gate")
    [d] = toolgate.TurnState().judge(daily, batch(("refund", {})))["decisions"]
    assert (d["allow"], d["kind"], d["rule"]) == (False, "budget", "daily")
    assert "not known" in d["reason"]


def test_a_batch_judged_again_or_blocked_by_the_turns_latch_consumes_nothing(shop):
    state = toolgate.TurnState()
    refunds = [("refund", {"amount": 50})] * 2
    for _ in range(3):
        assert allowed(state.judge(shop, batch(*refunds), "t1", batch="m1")) == [True, True], "the kept response, counted once"
    state.judge(shop, batch(("fetch", {})), "t2")
    [blocked] = state.judge(shop, batch(("send", {})), "t2")["decisions"]
    assert blocked["kind"] == "latch"
    assert allowed(state.judge(shop, batch(("send", {}), ("send", {})), "t3")) == [True, True]


def test_a_request_cannot_bring_its_own_counts(shop):
    request = batch(("refund", {"amount": 1}))
    request["facts"]["spent"] = {"refunds": 0}
    with pytest.raises(toolgate.RequestError) as e:
        toolgate.TurnState().judge(shop, request)
    assert e.value.field == "facts.spent"


def test_a_judgement_no_call_runs_on_counts_nothing(shop):
    state = toolgate.TurnState()
    refund = batch(("refund", {"amount": 60}))
    for _ in range(3):
        assert allowed(state.judge(shop, refund, batch="m1", spend=False)) == [True]
    assert state.decision(shop, "c0", "refund", {"amount": 60}, batch="m1") is None, "an uncounted allow is never served"
    assert allowed(state.judge(shop, refund)) == [True], "the previews spent nothing"
    assert allowed(state.judge(shop, refund)) == [False]


def test_a_preview_then_the_judgement_that_runs_counts_once(shop):
    from toolgate.adapters.turn import Turn

    turn = Turn(shop, {"stage": "main"})
    refund = {"amount": 60}
    assert turn.preview("refund", refund)["allow"] and turn.preview("refund", refund)["allow"]
    assert turn.judge_one("refund", refund)["allow"]
    assert not turn.judge_one("refund", refund)["allow"], "60 of 100 spent, once"
