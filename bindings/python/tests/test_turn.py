"""`Turn` and `Gate`, the per-user-turn state of the one-call-at-a-time adapters."""

import toolgate
from toolgate.adapters.turn import Gate, Turn


def test_latches_set_by_a_judged_call_block_later_calls_until_a_new_turn(agent_policy):
    gate = Gate(agent_policy, facts={"stage": "main"})
    turn = gate.turn("s1")
    assert turn.judge_one("refund", {"amount": 5})["allow"]
    assert turn.judge_one("web_fetch", {"url": "https://example.com"})["allow"]
    blocked = turn.judge_one("refund", {"amount": 5})
    assert (blocked["allow"], blocked["kind"]) == (False, "latch")
    assert gate.turn("s2").judge_one("refund", {"amount": 5})["allow"], "another session is not latched"
    assert gate.start_turn("s1").judge_one("refund", {"amount": 5})["allow"]


def test_a_new_epoch_starts_a_new_turn_and_the_same_epoch_keeps_it(agent_policy):
    gate = Gate(agent_policy, facts={"stage": "main"})
    gate.turn("s", epoch="inv-1").judge_one("web_fetch", {"url": "https://example.com"})
    assert not gate.turn("s", epoch="inv-1").judge_one("refund", {"amount": 5})["allow"]
    assert gate.turn("s", epoch="inv-2").judge_one("refund", {"amount": 5})["allow"]


def test_what_cannot_be_judged_is_denied_with_the_reason(agent_policy):
    turn = Turn(agent_policy, {"stage": "main"})
    bad_args = turn.judge_one("refund", ["not", "an", "object"])
    assert (bad_args["allow"], bad_args["kind"]) == (False, "unjudged")
    unknown_latch = Turn(agent_policy, {"stage": "main", "latched": {"nope": True}}).judge_one("lookup_order", {"order": "1"})
    assert not unknown_latch["allow"] and "nope" in unknown_latch["reason"]
    duplicate = turn.judge_one("refund", '{"amount": 5, "amount": 5000}')
    assert not duplicate["allow"] and "twice" in duplicate["reason"]
    not_json = turn.judge_one("refund", '{"amount": 5')
    assert not not_json["allow"]


def test_a_store_is_read_per_call_so_a_swap_applies_mid_turn(agent_policy):
    store = toolgate.PolicyStore(agent_policy)
    turn = Turn(store, {"stage": "main"})
    assert turn.judge_one("lookup_order", {"order": "1"})["allow"]
    store.swap(toolgate.compile("module agent\nread lookup_order\nstage other { tools [lookup_order] }\n"))
    assert not turn.judge_one("lookup_order", {"order": "1"})["allow"]


def test_recorded_calls_become_facts_called_for_called_before_rules():
    policy = toolgate.compile(
        "module bank\nread verify_identity\nwrite modify_booking\n"
        "stage main { tools [verify_identity, modify_booking] }\n"
        "rule identity_verified for modify_booking { require called_before(verify_identity) }\n"
    )
    turn = Turn(policy, {"stage": "main", "called": []})
    assert not turn.judge_one("modify_booking", {})["allow"]
    turn.record("verify_identity", ok=False)
    assert not turn.judge_one("modify_booking", {})["allow"], "a failed call does not count"
    turn.record("verify_identity", ok=True)
    assert turn.judge_one("modify_booking", {})["allow"]
    assert turn.called == [{"tool": "verify_identity", "ok": False}, {"tool": "verify_identity", "ok": True}]


def test_recorded_calls_are_dated_this_turn_so_called_within_rules_can_pass():
    policy = toolgate.compile(
        "module bank\nread verify_identity\nwrite modify_booking\n"
        "stage main { tools [verify_identity, modify_booking] }\n"
        "rule fresh_identity for modify_booking { require called_within(verify_identity, turns: 1) }\n"
    )
    # The executor's history from earlier turns keeps its ages: two turns old is too old.
    turn = Turn(policy, {"stage": "main", "called": [{"tool": "verify_identity", "ok": True, "turns_ago": 2}]})
    assert not turn.judge_one("modify_booking", {})["allow"]
    turn.record("verify_identity", ok=True)
    assert turn.judge_one("modify_booking", {})["allow"], "a call recorded this turn is dated this turn"

    # Carried into the next turn, the call is a turn old: `history()` ages every entry.
    history = turn.history()
    assert history == [
        {"tool": "verify_identity", "ok": True, "turns_ago": 3},
        {"tool": "verify_identity", "ok": True, "turns_ago": 1},
    ]
    assert not Turn(policy, {"stage": "main", "called": history}).judge_one("modify_booking", {})["allow"]
    # `called` copied as it is carries the calls undated, never as this turn's: denied.
    assert turn.called[-1] == {"tool": "verify_identity", "ok": True}
    assert not Turn(policy, {"stage": "main", "called": turn.called}).judge_one("modify_booking", {})["allow"]
