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


REFUND = {"id": "call_0", "tool": "refund", "args": {"amount": 5}}
FETCH = {"id": "call_0", "tool": "web_fetch", "args": {"url": "https://example.com"}}


def test_a_batch_verdict_never_answers_a_call_of_a_later_batch_with_the_same_call_id(agent_policy):
    # A provider numbering call ids per model message: both messages hold a `call_0`.
    turn = Gate(agent_policy, facts={"stage": "main"}).turn("s")
    turn.judge_batch_once("message-1", [REFUND])
    turn.judge_batch_once("message-2", [FETCH])
    assert turn.batch_decision("call_0", "refund", {"amount": 5}) is None
    assert not turn.judge_one("refund", {"amount": 5}, "call_0")["allow"]


def test_a_batch_verdict_judged_before_a_latch_is_never_served_after_it(agent_policy):
    turn = Gate(agent_policy, facts={"stage": "main"}).turn("s")
    turn.judge_batch_once("message-1", [REFUND])
    assert turn.batch_decision("call_0", "refund", {"amount": 5})["allow"], "the batch's own call is answered"
    assert turn.judge_one("web_fetch", {"url": "https://example.com"}, "call_9")["allow"]
    assert turn.batch_decision("call_0", "refund", {"amount": 5}) is None
    # Asked to judge the same message again, the turn judges it with the latch now set.
    [again] = turn.judge_batch_once("message-1", [REFUND])
    assert (again["allow"], again["kind"]) == (False, "latch")


def test_a_batch_verdict_answers_only_its_own_batch_call_tool_and_arguments(agent_policy):
    gate = Gate(agent_policy, facts={"stage": "main"})
    turn = gate.turn("s")
    turn.judge_batch_once("message-1", [REFUND])
    assert turn.batch_decision("call_0", "refund", {"amount": 5}, batch_id="message-2") is None
    assert turn.batch_decision("call_0", "refund", {"amount": 50}) is None
    assert turn.batch_decision("call_0", "lookup_order", {"amount": 5}) is None
    assert turn.batch_decision("call_1", "refund", {"amount": 5}) is None
    # Another turn of the session never gets this turn's verdicts.
    assert gate.start_turn("s").batch_decision("call_0", "refund", {"amount": 5}) is None
    assert turn.batch_decision("call_0", "refund", {"amount": 5}, batch_id="message-1")["allow"]
    # Given once: a second call under the same id is another call, judged alone.
    assert turn.batch_decision("call_0", "refund", {"amount": 5}, batch_id="message-1") is None


def test_raw_arguments_match_a_kept_verdict_only_as_the_engine_reads_them(agent_policy):
    turn = Gate(agent_policy, facts={"stage": "main"}).turn()
    turn.judge_batch_once("m", [("c1", "refund", '{"amount": 5}')], raw=True)
    # A key given twice reads as no value, so it never matches the verdict of its last copy.
    assert turn.batch_decision("c1", "refund", '{"amount": 5000, "amount": 5}') is None
    assert turn.batch_decision("c1", "refund", "not json") is None
    assert turn.batch_decision("c1", "refund", '{ "amount":5 }')["allow"]


def test_a_late_event_of_an_earlier_epoch_never_resets_the_current_turn(agent_policy):
    gate = Gate(agent_policy, facts={"stage": "main"})
    gate.turn("s", epoch="p1").judge_one("web_fetch", {"url": "https://example.com"})
    gate.turn("s", epoch="p2").judge_one("web_fetch", {"url": "https://example.com"})
    gate.turn("s", epoch="p1").record("web_fetch")  # the first prompt's post-tool event, late
    assert not gate.turn("s", epoch="p2").judge_one("refund", {"amount": 5})["allow"]
    assert not gate.turn("s").judge_one("refund", {"amount": 5})["allow"], "p2 is still the current turn"


def test_a_known_epoch_goes_back_to_its_own_turn_and_latches(agent_policy):
    gate = Gate(agent_policy, facts={"stage": "main"})
    gate.turn("s", epoch="p1").judge_one("web_fetch", {"url": "https://example.com"})
    assert gate.turn("s", epoch="p2").latched is False
    late = gate.turn("s", epoch="p1").judge_one("refund", {"amount": 5})
    assert (late["allow"], late["kind"]) == (False, "latch"), "a late call of p1 is judged latched"
    assert gate.turn("s", epoch="p2").judge_one("refund", {"amount": 5})["allow"]
    # A repeated signal of a known turn changes nothing.
    assert gate.start_turn("s", epoch="p1").latched is True
    assert gate.turn("s").id == "p2"


def test_recording_never_starts_a_turn_and_an_unknown_epoch_records_undated():
    policy = toolgate.compile(
        "module bank\nread verify_identity\nwrite modify_booking\n"
        "stage main { tools [verify_identity, modify_booking] }\n"
        "rule fresh_identity for modify_booking { require called_within(verify_identity, turns: 1) }\n"
    )
    gate = Gate(policy, facts={"stage": "main"})
    turn = gate.turn("s", epoch="p1")
    gate.record("s", "verify_identity", epoch="never-seen")
    assert gate.turn("s") is turn
    assert not turn.judge_one("modify_booking", {})["allow"], "an undated call is never recent"
    gate.record("s", "verify_identity", epoch="p1")
    assert turn.judge_one("modify_booking", {})["allow"]


def test_calls_of_earlier_turns_of_the_session_count_and_are_dated_by_their_turn():
    policy = toolgate.compile(
        "module bank\nread verify_identity\nwrite modify_booking, close_account\n"
        "stage main { tools [verify_identity, modify_booking, close_account] }\n"
        "rule identity_verified for modify_booking { require called_before(verify_identity) }\n"
        "rule fresh_identity for close_account { require called_within(verify_identity, turns: 1) }\n"
    )
    gate = Gate(policy, facts={"stage": "main"})
    gate.turn("s", epoch="p1").record("verify_identity")
    later = gate.turn("s", epoch="p2")
    assert later.judge_one("modify_booking", {})["allow"], "verified earlier in the conversation"
    assert not later.judge_one("close_account", {})["allow"], "but not this turn"
    assert later.called == [] and gate.turn("s", epoch="p1").called == [{"tool": "verify_identity", "ok": True}]
    assert later.state.called == [{"tool": "verify_identity", "ok": True, "turns_ago": 1}]
