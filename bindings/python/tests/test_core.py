"""The core API: decide/offer/explain, the three request forms, typed errors, the store."""

import datetime
import json
import math
import subprocess
import threading

import pytest

import toolgate
from conftest import EXAMPLES, example_requests

SHOP = """module shop
write  refund, send_email
ingest web_fetch
read   lookup_order
stage support  { tools [refund, web_fetch, lookup_order] }
stage escalate { tools [send_email, lookup_order] }
latch untrusted { set_by ingest  blocks write }
hosts docs { allow ["example.com", ".example.com"] }
rule docs_only for web_fetch { require args.url in hosts docs }
rule small_refund for refund { require args.amount is number and args.amount <= 50 }
"""


def shop():
    return toolgate.compile(SHOP, "shop.gate")


def call(i, tool, **args):
    return {"id": str(i), "tool": tool, "args": args}


@pytest.mark.parametrize("gate,request_file", example_requests())
def test_decide_is_what_toolgate_eval_prints(toolgate_bin, gate, request_file):
    out = subprocess.run(
        [toolgate_bin, "eval", "--compact", "--policy", str(gate), "--input", str(request_file)],
        check=True,
        capture_output=True,
        text=True,
    )
    expected = json.loads(out.stdout)
    policy = toolgate.load(gate)
    assert policy.decide(json.loads(request_file.read_text())) == expected


@pytest.mark.parametrize("gate,request_file", example_requests())
def test_dict_str_and_bytes_agree(gate, request_file):
    policy = toolgate.load(gate)
    text = request_file.read_text()
    from_dict = policy.decide(json.loads(text))
    assert policy.decide(text) == from_dict
    assert policy.decide(text.encode()) == from_dict
    assert [e["decision"] for e in policy.explain(json.loads(text))] == from_dict["decisions"]


def test_a_denial_is_a_result_with_its_reason():
    response = shop().decide(
        {"facts": {"stage": "support"}, "calls": [call(1, "refund", amount=20), call(2, "web_fetch", url="https://example.com.evil.io/")]}
    )
    refund, fetch = response["decisions"]
    assert response["latched"] is True
    assert (refund["allow"], refund["kind"], refund["rule"]) == (False, "latch", "untrusted")
    assert (fetch["allow"], fetch["kind"]) == (False, "host")
    assert fetch["reason"] and refund["reason"]
    assert response["policy"] == "shop" and response["revision"] == shop().revision


def test_an_allowed_call_has_no_denial_fields():
    response = shop().decide({"facts": {"stage": "support"}, "calls": [call(1, "refund", amount=20)]})
    assert response["decisions"] == [{"id": "1", "tool": "refund", "allow": True}]
    assert response["latched"] is False


def test_name_revision_and_warnings():
    policy = toolgate.compile("module w\nread a, b\nstage s { tools [a] }\n", "w.gate")
    assert policy.name == "w"
    assert len(policy.revision) == 16
    [warning] = policy.warnings
    assert (warning.severity, warning.file, warning.line, warning.column) == ("warning", "w.gate", 2, 9)
    assert "allowed in no stage" in warning.message and warning.help


def test_compile_error_renders_every_diagnostic_with_its_location():
    source = "module x\nread lookup\nstage s { tools [lookpu] }\n"
    with pytest.raises(toolgate.CompileError) as caught:
        toolgate.compile(source, "x.gate")
    err = caught.value
    text = str(err)
    assert text.startswith("x.gate:")
    assert "x.gate:3:18: error: stage `s` names tool `lookpu`, which is never classified" in text
    assert "^" in text and "did you mean `lookup`?" in text
    errors = [d for d in err.diagnostics if d.severity == "error"]
    assert [(d.file, d.line, d.column) for d in errors] == [("x.gate", 3, 18)]
    assert errors[0].help == "did you mean `lookup`?"
    assert isinstance(err, ValueError)


def test_syntax_errors_are_compile_errors_too():
    with pytest.raises(toolgate.CompileError) as caught:
        toolgate.compile("module x\nstage s { tools [ }\n", "bad.gate")
    assert caught.value.diagnostics[0].line == 2
    assert "bad.gate:2:" in str(caught.value)


def test_compile_resolves_stdlib_but_refuses_file_imports(tmp_path):
    (tmp_path / "shared.gate").write_text('module shared\nhosts docs { allow ["docs.example.com"] }\n')
    source = 'module main\nuse "shared.gate"\nread fetch\nstage s { tools [fetch] }\n'
    with pytest.raises(toolgate.CompileError) as caught:
        toolgate.compile(source, str(tmp_path / "main.gate"))
    [d] = [d for d in caught.value.diagnostics if d.severity == "error"]
    assert d.line == 2 and "toolgate.load" in d.help
    support = (EXAMPLES / "support_desk.gate").read_text()
    assert "use stdlib::" in support
    assert toolgate.compile(support, "support_desk.gate").name == "support_desk"


def test_load_resolves_file_imports_relative_to_the_file(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "shared.gate").write_text('module shared\nhosts docs { allow ["docs.example.com"] }\n')
    (tmp_path / "main.gate").write_text(
        'module main\nuse "sub/shared.gate"\ningest fetch\nstage s { tools [fetch] }\n'
        "rule docs_only for fetch { require args.url in hosts docs }\n"
    )
    monkeypatch.chdir(tmp_path / "sub")  # not the policy's directory
    policy = toolgate.load(tmp_path / "main.gate")
    ok, bad = policy.decide(
        {"facts": {"stage": "s"}, "calls": [call(1, "fetch", url="https://docs.example.com/a"), call(2, "fetch", url="https://evil.io/")]}
    )["decisions"]
    assert ok["allow"] and not bad["allow"]


def test_load_of_a_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError) as caught:
        toolgate.load(tmp_path / "nope.gate")
    assert "nope.gate" in str(caught.value)


@pytest.mark.parametrize("form", [str, lambda s: s.encode()])
def test_a_key_given_twice_in_text_is_refused_with_its_path(form):
    text = '{"facts": {"stage": "support"}, "calls": [{"id": "1", "tool": "refund", "args": {"amount": 20, "amount": 5000}}]}'
    with pytest.raises(toolgate.RequestError) as caught:
        shop().decide(form(text))
    err = caught.value
    assert err.field == "calls[0].args.amount"
    second = text.index('"amount": 5000')
    assert (err.line, err.column) == (1, second + len('"amount"'))
    assert "twice" in str(err)


def test_request_errors_name_the_field_in_every_form():
    bad = {"facts": {"stage": 3}, "calls": []}
    for request in (bad, json.dumps(bad), json.dumps(bad).encode()):
        with pytest.raises(toolgate.RequestError) as caught:
            shop().decide(request)
        assert caught.value.field == "facts.stage"
        assert str(caught.value).startswith("request field `facts.stage`:")


@pytest.mark.parametrize(
    "sent,field,meant",
    [
        ({"id": "1", "tool": "refund", "arguments": {"amount": 5000}}, "calls[0].arguments", "args"),
        ({"id": "1", "tool": "refund", "input": {"amount": 5000}}, "calls[0].input", "args"),
        ({"id": "1", "name": "refund", "args": {"amount": 5000}}, "calls[0].name", "tool"),
    ],
)
def test_a_call_with_a_model_apis_own_keys_is_refused_not_judged_without_arguments(sent, field, meant):
    # Every object of a request is closed: an unknown key used to be ignored, so `arguments`
    # was judged as no arguments at all.
    for request in ({"facts": {"stage": "support"}, "calls": [sent]}, json.dumps({"facts": {"stage": "support"}, "calls": [sent]})):
        with pytest.raises(toolgate.RequestError) as caught:
            shop().decide(request)
        assert caught.value.field == field
        assert f"did you mean `{meant}`?" in str(caught.value)


def test_a_request_for_another_policy_is_refused():
    with pytest.raises(toolgate.RequestError) as caught:
        shop().decide({"policy": "other", "calls": []})
    assert caught.value.field == "policy"


def test_two_calls_with_one_id_are_refused():
    with pytest.raises(toolgate.RequestError):
        shop().decide({"facts": {"stage": "support"}, "calls": [call(1, "refund", amount=1), call(1, "lookup_order")]})


@pytest.mark.parametrize(
    "value,needle",
    [
        (datetime.date(2026, 1, 1), "found date"),
        (math.nan, "finite number"),
        (math.inf, "finite number"),
        ({1: "x"}, "keys must be strings"),
        ({"a", "b"}, "found set"),
        (10**400, "too large"),
    ],
)
def test_python_values_json_cannot_carry_are_refused_with_their_path(value, needle):
    with pytest.raises(toolgate.RequestError) as caught:
        shop().decide({"facts": {"stage": "support"}, "calls": [call(1, "refund", amount=value)]})
    assert caught.value.field == "calls[0].args.amount"
    assert needle in str(caught.value)


def test_a_self_referencing_dict_is_an_error_not_a_crash():
    args = {}
    args["again"] = args
    with pytest.raises(toolgate.RequestError) as caught:
        shop().decide({"facts": {"stage": "support"}, "calls": [{"id": "1", "tool": "refund", "args": args}]})
    assert "deeper than 128" in str(caught.value)


def test_tuples_and_big_ints_read_as_json_does():
    policy = shop()
    as_dict = {"facts": {"stage": "support"}, "calls": (call(1, "refund", amount=2**63), call(2, "refund", amount=7.5))}
    assert policy.decide(as_dict) == policy.decide(json.dumps(as_dict))


def test_bytes_that_are_not_utf8_are_a_request_error():
    with pytest.raises(toolgate.RequestError) as caught:
        shop().decide(b'{"calls": [],\n "x": "\xff"}')
    assert (caught.value.line, caught.value.column) == (2, 8)


def test_other_request_types_are_a_type_error():
    with pytest.raises(TypeError):
        shop().decide([{"calls": []}])


def test_offer_withholds_what_the_stage_does_not_list():
    tools = [{"name": n, "description": n} for n in ("refund", "send_email", "mystery")]
    offer = shop().offer({"facts": {"stage": "support"}, "tools": tools})
    assert [t["name"] for t in offer["tools"]] == ["refund"]
    assert {w["name"]: w["reason"] for w in offer["withheld"]} == {"send_email": "not_in_stage", "mystery": "unclassified"}
    latched = shop().offer(json.dumps({"facts": {"stage": "support", "latched": True}, "tools": tools}))
    assert [d["name"] for d in latched["disabled"]] == ["refund"]


def test_explain_lists_the_checks_in_order():
    [explained] = shop().explain({"facts": {"stage": "support"}, "calls": [call(1, "refund", amount=500)]})
    assert explained["decision"]["kind"] == "args"
    assert [s["check"] for s in explained["steps"]][-1] == "rule small_refund"
    assert explained["steps"][-1]["passed"] is False


def test_policy_store_swaps_under_threads_and_each_decision_sees_one_revision():
    allows = toolgate.compile("module m\nread a\nstage s { tools [a] }\n", "allow.gate")
    denies = toolgate.compile("module m\nread a, b\nstage s { tools [b] }\n", "deny.gate")
    store = toolgate.PolicyStore(allows)
    assert store.current().revision == allows.revision
    request = {"facts": {"stage": "s"}, "calls": [call(1, "a"), call(2, "a")]}
    seen = {allows.revision: 0, denies.revision: 0}
    errors = []
    stop = threading.Event()

    def reader():
        try:
            while not stop.is_set():
                response = store.current().decide(request)
                expected = response["revision"] == allows.revision
                assert [d["allow"] for d in response["decisions"]] == [expected, expected]
                seen[response["revision"]] += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(400):
        store.swap(denies if i % 2 == 0 else allows)
    store.swap(denies)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors
    assert store.current().revision == denies.revision
    assert sum(seen.values()) > 0


def test_a_request_large_enough_to_release_the_gil_is_judged_alike_in_every_form():
    # Over 16 KiB of JSON: the engine reads and judges it with the GIL released.
    note = "x" * 40_000
    request = {"facts": {"stage": "support"}, "calls": [call(1, "refund", amount=20, note=note), call(2, "web_fetch", url="https://example.com/")]}
    expected = shop().decide(json.dumps(request))
    assert [d["allow"] for d in expected["decisions"]] == [False, True]
    results = []
    threads = [threading.Thread(target=lambda: results.append(shop().decide(request))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 4
    assert shop().decide(json.dumps(request).encode()) == expected
