"""Asks in LangChain v1 / LangGraph (issue 24): with `asks=True` the middleware raises a
LangGraph interrupt in `HumanInTheLoopMiddleware`'s shape (`action_requests`,
`review_configs`) for the calls toolgate asks about, and the run resumes with
`Command(resume={"decisions": [...]})`. langchain-core's fake chat model stands in for the
model API; the agent graph runs for real."""

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from test_adapter_langchain import agent_with, tool_call, tool_messages
from toolgate.adapters.langchain import toolgate_middleware


def asking_agent(policy, script):
    return agent_with(policy, script, checkpointer=InMemorySaver(), middleware=toolgate_middleware(policy, facts={"stage": "main"}, asks=True))


CONFIG = {"configurable": {"thread_id": "t"}}


def interrupted(out):
    [interrupt] = out["__interrupt__"]
    return interrupt.value


def test_yes_runs_the_call_once_and_a_second_identical_call_asks_again(ask_policy):
    script = [
        AIMessage("", tool_calls=[tool_call("c1", "refund", amount=80)]),
        AIMessage("", tool_calls=[tool_call("c2", "refund", amount=80)]),
        AIMessage("-"),
    ]
    agent, model, ran = asking_agent(ask_policy, script)
    request = interrupted(agent.invoke({"messages": [HumanMessage("refund 80")]}, CONFIG))
    [action] = request["action_requests"]
    assert (action["name"], action["args"]) == ("refund", {"amount": 80})
    assert action["description"].startswith("Approval needed")
    assert request["review_configs"] == [{"action_name": "refund", "allowed_decisions": ["approve", "reject"]}]
    again = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
    assert ran.tools() == ["refund"]
    [second] = interrupted(again)["action_requests"]
    assert second["args"] == {"amount": 80}, "the same call asks again"


def test_no_keeps_the_call_from_running_and_the_model_reads_the_refusal(ask_policy):
    script = [AIMessage("", tool_calls=[tool_call("c1", "refund", amount=80)]), AIMessage("sorry")]
    agent, model, ran = asking_agent(ask_policy, script)
    interrupted(agent.invoke({"messages": [HumanMessage("refund 80")]}, CONFIG))
    out = agent.invoke(Command(resume={"decisions": [{"type": "reject", "message": "no receipt"}]}), CONFIG)
    assert ran.tools() == []
    refusal = tool_messages(out["messages"])["c1"]
    assert refusal.status == "error" and "declined" in refusal.content and "no receipt" in refusal.content


def test_an_approval_for_one_call_does_not_allow_another_in_the_batch(ask_policy):
    script = [AIMessage("", tool_calls=[tool_call("c1", "refund", amount=80), tool_call("c2", "refund", amount=90)]), AIMessage("-")]
    agent, model, ran = asking_agent(ask_policy, script)
    request = interrupted(agent.invoke({"messages": [HumanMessage("refund 80 and 90")]}, CONFIG))
    assert [a["args"] for a in request["action_requests"]] == [{"amount": 80}, {"amount": 90}]
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}, {"type": "reject"}]}), CONFIG)
    assert ran.calls == [("refund", 80)]
    assert tool_messages(out["messages"])["c2"].status == "error"


def test_two_identical_calls_and_one_yes_each_run_once_at_most(ask_policy):
    script = [AIMessage("", tool_calls=[tool_call("c1", "refund", amount=80), tool_call("c2", "refund", amount=80)]), AIMessage("-")]
    agent, model, ran = asking_agent(ask_policy, script)
    interrupted(agent.invoke({"messages": [HumanMessage("refund 80 twice")]}, CONFIG))
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}, {"type": "approve"}]}), CONFIG)
    assert ran.calls == [("refund", 80)], "one approval digest, one call"
    assert tool_messages(out["messages"])["c2"].content.startswith("Approval needed")


def test_without_asks_an_ask_is_a_denial_with_its_reason(ask_policy):
    agent, model, ran = agent_with(ask_policy, [AIMessage("", tool_calls=[tool_call("c1", "refund", amount=80)]), AIMessage("sorry")])
    out = agent.invoke({"messages": [HumanMessage("refund 80")]})
    assert "__interrupt__" not in out and ran.tools() == []
    assert tool_messages(out["messages"])["c1"].content.startswith("Approval needed")
