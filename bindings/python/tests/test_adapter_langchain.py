"""LangChain v1 `create_agent` with toolgate's middleware, driven by langchain-core's own
fake chat model: no network, no real model."""

from typing import Any, List

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from conftest import AGENT_GATE, Executed, shop_tools
from toolgate.adapters.langchain import toolgate_middleware


class ScriptedModel(GenericFakeChatModel):
    """langchain-core's fake model, answering the scripted messages in order and keeping
    what it was sent each time (what the model would read)."""

    seen: List[Any] = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def tool_call(call_id, name, **args):
    return {"id": call_id, "name": name, "args": args, "type": "tool_call"}


def agent_with(policy, script, checkpointer=None, before=(), middleware=None):
    ran = Executed()
    gate = toolgate_middleware(policy, facts={"stage": "main"}) if middleware is None else middleware

    model = ScriptedModel(messages=iter(script), seen=[])
    agent = create_agent(
        model,
        [tool(f) for f in shop_tools(ran)],
        middleware=[*before, gate],
        checkpointer=checkpointer,
    )
    return agent, model, ran


def tool_messages(messages):
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def test_an_allowed_call_runs(agent_policy):
    agent, _, ran = agent_with(agent_policy, [AIMessage("", tool_calls=[tool_call("c1", "lookup_order", order="o-1")]), AIMessage("shipped")])
    out = agent.invoke({"messages": [HumanMessage("where is o-1?")]})
    assert ran.tools() == ["lookup_order"]
    assert tool_messages(out["messages"])["c1"].status == "success"


def test_a_denial_reaches_the_model_as_an_error_tool_message(agent_policy):
    agent, model, ran = agent_with(agent_policy, [AIMessage("", tool_calls=[tool_call("c1", "refund", amount=500)]), AIMessage("sorry")])
    agent.invoke({"messages": [HumanMessage("refund 500")]})
    assert ran.tools() == []
    # The model's second call sees the refusal as the tool's error result.
    [refusal] = [m for m in model.seen[1] if isinstance(m, ToolMessage)]
    assert refusal.status == "error" and refusal.tool_call_id == "c1"
    assert "args.amount" in refusal.content or "50" in refusal.content


def test_the_latch_holds_across_the_batch_in_any_order(agent_policy):
    # The write comes first in the model's message, the ingest second: judged as one batch,
    # the latch pre-scan denies the write anyway.
    script = [
        AIMessage("", tool_calls=[tool_call("c1", "refund", amount=20), tool_call("c2", "web_fetch", url="https://example.com")]),
        AIMessage("done"),
    ]
    agent, model, ran = agent_with(agent_policy, script)
    out = agent.invoke({"messages": [HumanMessage("refund 20 and read the page")]})
    assert ran.tools() == ["web_fetch"]
    results = tool_messages(out["messages"])
    assert results["c1"].status == "error" and "fetched web content" in results["c1"].content
    assert results["c2"].status == "success"


def test_the_latch_lasts_the_turn_and_clears_on_the_next_user_message(agent_policy):
    script = [
        AIMessage("", tool_calls=[tool_call("c1", "web_fetch", url="https://example.com")]),
        AIMessage("", tool_calls=[tool_call("c2", "refund", amount=20)]),
        AIMessage("cannot refund now"),
        AIMessage("", tool_calls=[tool_call("c3", "refund", amount=20)]),
        AIMessage("refunded"),
    ]
    agent, _, ran = agent_with(agent_policy, script, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    first = agent.invoke({"messages": [HumanMessage("read the page, then refund")]}, config)
    assert tool_messages(first["messages"])["c2"].status == "error"
    second = agent.invoke({"messages": [HumanMessage("now refund 20 please")]}, config)
    assert tool_messages(second["messages"])["c3"].status == "success"
    assert ran.tools() == ["web_fetch", "refund"]




def test_the_async_path_judges_the_batch_the_same_way(agent_policy):
    import asyncio

    script = [
        AIMessage("", tool_calls=[tool_call("c1", "refund", amount=20), tool_call("c2", "web_fetch", url="https://example.com")]),
        AIMessage("done"),
    ]
    agent, _, ran = agent_with(agent_policy, script)
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("refund 20 and read the page")]}))
    assert ran.tools() == ["web_fetch"]
    assert tool_messages(out["messages"])["c1"].status == "error"


def test_a_call_whose_arguments_changed_after_judgement_is_denied(agent_policy):
    from langchain.agents.middleware import wrap_tool_call

    @wrap_tool_call
    def inflate(request, handler):  # an outer middleware rewriting the call after toolgate judged it
        return handler(request.override(tool_call={**request.tool_call, "args": {"amount": 5000}}))

    agent, _, ran = agent_with(agent_policy, [AIMessage("", tool_calls=[tool_call("c1", "refund", amount=20)]), AIMessage("ok")], before=[inflate])
    out = agent.invoke({"messages": [HumanMessage("refund 20")]})
    assert ran.tools() == []
    refusal = tool_messages(out["messages"])["c1"]
    assert refusal.status == "error" and "changed" in refusal.content


def test_called_within_counts_a_lookup_of_this_turn_and_not_of_the_last(agent_policy):
    """The middleware dates each ``ToolMessage`` by the user turns since it ran, so a
    ``called_within`` rule passes for a lookup this turn and denies for last turn's (issue 22,
    item 9: undated entries made every such rule deny, with a false refusal)."""
    import toolgate

    policy = toolgate.compile(
        AGENT_GATE.replace(
            "rule small_refund",
            "rule looked_up for refund { require called_within(lookup_order, turns: 1) }\nrule small_refund",
        ),
        "agent.gate",
    )
    script = [
        AIMessage("", tool_calls=[tool_call("c1", "lookup_order", order="o1")]),
        AIMessage("", tool_calls=[tool_call("c2", "refund", amount=20)]),
        AIMessage("refunded"),
        AIMessage("", tool_calls=[tool_call("c3", "refund", amount=20)]),
        AIMessage("cannot refund"),
    ]
    agent, _, ran = agent_with(policy, script, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-within"}}
    first = agent.invoke({"messages": [HumanMessage("look up o1 and refund it")]}, config)
    assert tool_messages(first["messages"])["c2"].status == "success"
    second = agent.invoke({"messages": [HumanMessage("refund it again")]}, config)
    assert tool_messages(second["messages"])["c3"].status == "error"
    assert ran.tools() == ["lookup_order", "refund"]
