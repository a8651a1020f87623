"""`toolgate.TurnState`: the Rust turn model (`toolgate_turns::SessionTurns`) from Python."""

import threading

import pytest

import toolgate

FACTS = {"stage": "main"}


def batch(*calls):
    return {"facts": dict(FACTS), "calls": [{"id": i, "tool": t, "args": a} for i, t, a in calls]}


FETCH = ("c1", "web_fetch", {"url": "https://example.com"})
REFUND = ("c2", "refund", {"amount": 5})


def test_judge_places_decides_and_latches_the_turn(agent_policy):
    state = toolgate.TurnState()
    state.signal(agent_policy, "t1")
    response = state.judge(agent_policy, batch(FETCH), "t1")
    assert response["latched"] is True and response["decisions"][0]["allow"]
    assert state.latched is True and state.turns == 1
    [refund] = state.judge(agent_policy, batch(REFUND), "t1")["decisions"]
    assert (refund["allow"], refund["kind"]) == (False, "latch")


def test_an_unseen_turn_id_starts_a_turn_and_a_known_one_keeps_its_latches(agent_policy):
    state = toolgate.TurnState()
    state.signal(agent_policy, "t1")
    state.judge(agent_policy, batch(FETCH), "t1")
    assert state.judge(agent_policy, batch(REFUND), "t2")["decisions"][0]["allow"]
    assert state.turns == 2 and state.latched is False
    assert not state.judge(agent_policy, batch(REFUND), "t1")["decisions"][0]["allow"]
    state.signal(agent_policy, "t1")  # a late signal of a known turn
    assert state.turns == 2 and state.latched is False
    assert state.latches(agent_policy, "t1") is True
    assert state.latches(agent_policy, "t3") is False, "an unseen id reads as a new turn"
    assert state.turns == 2, "reading changes nothing"


def test_before_any_signal_the_first_unseen_id_names_the_sessions_first_turn(agent_policy):
    state = toolgate.TurnState()
    state.judge(agent_policy, batch(FETCH), "t0")
    assert state.turns == 0 and state.latches(agent_policy, "t0") is True
    state.record_call("web_fetch", True, "t0")
    assert state.called == [{"tool": "web_fetch", "ok": True}], "a call before any signal is undated"
    state.judge(agent_policy, batch(REFUND), "t1")
    assert state.turns == 1 and state.latched is False


def test_the_request_turn_field_names_the_turn(agent_policy):
    state = toolgate.TurnState()
    state.judge(agent_policy, dict(batch(FETCH), turn="t1"))
    assert state.latches(agent_policy, "t1") is True


def test_the_executors_latched_and_called_are_merged_with_the_sessions(agent_policy):
    state = toolgate.TurnState()
    state.signal(agent_policy, "t1")
    [refund] = state.judge(agent_policy, dict(batch(REFUND), facts={"stage": "main", "latched": True}), "t1")["decisions"]
    assert not refund["allow"]
    assert state.latches(agent_policy, "t1") is True, "the executor's latch is recorded into the turn"

    policy = toolgate.compile(
        "module bank\nread verify_identity, audit\nwrite modify_booking\n"
        "stage main { tools [verify_identity, audit, modify_booking] }\n"
        "rule identity_verified for modify_booking { require called_before(verify_identity) and called_before(audit) }\n"
    )
    state = toolgate.TurnState()
    state.signal(policy, "t1")
    request = {"facts": {"stage": "main", "called": [{"tool": "audit", "ok": True}]}, "calls": [{"id": "1", "tool": "modify_booking", "args": {}}]}
    assert not state.judge(policy, request, "t1")["decisions"][0]["allow"]
    state.record_call("verify_identity", True, "t1")
    assert state.judge(policy, request, "t1")["decisions"][0]["allow"]
    assert state.called == [{"tool": "verify_identity", "ok": True, "turns_ago": 0}]
    assert state.recorded(policy, "t1") == [{"tool": "verify_identity", "ok": True}]
    assert state.recorded(policy, "unknown") == []


def test_a_request_that_cannot_be_read_changes_nothing(agent_policy):
    state = toolgate.TurnState()
    with pytest.raises(toolgate.RequestError):
        state.judge(agent_policy, {"facts": FACTS, "calls": [{"id": "1", "tool": "refund", "args": {"a": 1, "b": float("nan")}}]}, "t1")
    with pytest.raises(toolgate.RequestError):
        state.judge(agent_policy, {"facts": {"stage": "main", "latched": {"nope": True}}, "calls": []}, "t1")
    assert state.turns == 0


def test_a_policy_that_no_longer_declares_a_set_latch_cannot_judge_the_turn(agent_policy):
    store = toolgate.PolicyStore(agent_policy)
    state = toolgate.TurnState()
    state.judge(store, batch(FETCH), "t1")
    store.swap(toolgate.compile("module agent\nread lookup_order\nstage main { tools [lookup_order] }\n"))
    with pytest.raises(toolgate.TurnError, match="untrusted"):
        state.judge(store, batch(("c3", "lookup_order", {"order": "1"})), "t1")
    assert state.latches(store, "t1") is True
    # The user's next message is a new turn the new policy can judge.
    assert state.judge(store, batch(("c4", "lookup_order", {"order": "1"})), "t2")["decisions"][0]["allow"]


def test_a_kept_batch_answers_only_its_own_calls_once_until_a_latch_changes(agent_policy):
    state = toolgate.TurnState()
    first = state.judge(agent_policy, batch(REFUND), "t1", "m1")
    assert state.judge(agent_policy, batch(REFUND), "t1", "m1") == first, "judged once"
    assert state.decision(agent_policy, "c2", "refund", {"amount": 5}, "t2", "m1") is None, "another turn"
    assert state.decision(agent_policy, "c2", "refund", {"amount": 5}, "t1", "m0") is None, "another batch"
    assert state.decision(agent_policy, "c2", "refund", '{"amount": 5}', "t1")["allow"], "default: the batch judged last"
    assert state.decision(agent_policy, "c2", "refund", {"amount": 5}, "t1", "m1") is None, "given once"
    # The same batch id with other calls is another message: judged, not answered from m1.
    assert state.judge(agent_policy, batch(FETCH), "t1", "m1")["latched"] is True
    assert state.decision(agent_policy, "c2", "refund", {"amount": 5}, "t1", "m1") is None
    # A batch judged in a latched turn keeps its (denying) verdicts.
    state.judge(agent_policy, batch(REFUND), "t1", "m2")
    assert state.decision(agent_policy, "c2", "refund", {"amount": 5}, "t1", "m2")["allow"] is False
    # Any latch change drops every kept verdict.
    state.judge(agent_policy, batch(REFUND), "t3", "m3")
    state.judge(agent_policy, batch(FETCH), "t3")
    assert state.decision(agent_policy, "c2", "refund", {"amount": 5}, "t3", "m3") is None


def test_a_kept_verdict_is_not_served_under_another_policy_revision(agent_policy):
    store = toolgate.PolicyStore(agent_policy)
    state = toolgate.TurnState()
    state.judge(store, batch(REFUND), "t1", "m1")
    store.swap(toolgate.compile(toolgate_source_with_lower_limit()))
    assert state.decision(store, "c2", "refund", {"amount": 5}, "t1", "m1") is None
    assert not state.judge(store, batch(REFUND), "t1", "m1")["decisions"][0]["allow"], "judged again by the new revision"


def toolgate_source_with_lower_limit():
    from conftest import AGENT_GATE

    return AGENT_GATE.replace("args.amount <= 50", "args.amount <= 1")


def test_the_policy_must_be_a_policy_or_a_store():
    with pytest.raises(TypeError):
        toolgate.TurnState().signal("not a policy")


def test_judgements_from_many_threads_never_lose_a_latch(agent_policy):
    state = toolgate.TurnState()
    state.signal(agent_policy, "t1")
    allowed_after_fetch = []
    fetched = threading.Event()

    def refunds():
        for _ in range(200):
            seen = fetched.is_set()
            allow = state.judge(agent_policy, batch(REFUND), "t1")["decisions"][0]["allow"]
            if seen and allow:
                allowed_after_fetch.append(1)

    threads = [threading.Thread(target=refunds) for _ in range(4)]
    for t in threads:
        t.start()
    state.judge(agent_policy, batch(FETCH), "t1")
    fetched.set()
    for t in threads:
        t.join()
    assert allowed_after_fetch == []
    assert state.latched is True
