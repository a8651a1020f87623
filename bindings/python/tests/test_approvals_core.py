"""Asks through the native binding: `Policy.approval_window`, `Policy.may_ask`, and the ask
decision's `kind` and `approval` digest (issue 24)."""

import re

import toolgate
from conftest import EXAMPLES

ASKS = """module desk
write refund
read lookup_order
stage main { tools [refund, lookup_order] }
approvals { valid_for 90s }
rule refunds for refund {
  require args.amount is number and args.amount <= 500
  ask when args.amount > 50
}
"""


def test_approval_window_is_the_policys_setting_in_seconds_and_ten_minutes_by_default():
    assert toolgate.compile(ASKS).approval_window == 90.0
    assert isinstance(toolgate.compile(ASKS).approval_window, float)
    plain = toolgate.compile("module p\nread look\nstage s { tools [look] }\n")
    assert plain.approval_window == 600.0


def test_may_ask_tells_a_policy_that_can_ask_from_one_that_cannot():
    assert toolgate.compile(ASKS).may_ask is True
    assert toolgate.compile("module p\nread look\nstage s { tools [look] }\n").may_ask is False
    assert toolgate.load(EXAMPLES / "support_desk.gate").may_ask is True


def test_an_ask_is_a_denial_of_kind_ask_carrying_its_digest_and_the_digest_allows_that_call():
    policy = toolgate.compile(ASKS)
    call = {"id": "1", "tool": "refund", "args": {"amount": 80}}
    [ask] = policy.decide({"facts": {"stage": "main"}, "calls": [call]})["decisions"]
    assert (ask["allow"], ask["kind"], ask["rule"]) == (False, "ask", "refunds")
    assert ask["reason"].startswith("Approval needed")
    assert re.fullmatch(r"ap1:[0-9a-f]{64}", ask["approval"])
    [allowed] = policy.decide({"facts": {"stage": "main", "approvals": [ask["approval"]]}, "calls": [call]})["decisions"]
    assert allowed["allow"] is True and allowed["approval"] == ask["approval"]
    other = dict(call, args={"amount": 81})
    [again] = policy.decide({"facts": {"stage": "main", "approvals": [ask["approval"]]}, "calls": [other]})["decisions"]
    assert again["kind"] == "ask" and again["approval"] != ask["approval"]
    [small] = policy.decide({"facts": {"stage": "main"}, "calls": [dict(call, args={"amount": 5})]})["decisions"]
    assert small["allow"] is True and "approval" not in small
