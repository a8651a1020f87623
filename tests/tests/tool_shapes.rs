//! Tool lists in the shapes executors already have (OpenAI, Anthropic, MCP `tools/list`) are
//! read, offered and written back in the shape they came in; anything else is an error that
//! names the accepted shapes.
#![allow(clippy::unwrap_used, clippy::panic)]

use serde_json::json;
use toolgate_engine::{Facts, RequestError, ToolDef};
use toolgate_tests::compile;

const POLICY: &str = "module m\nwrite pay\nread look\nstage s { tools [pay, look] }\nrule small for pay { require args.amount <= 10 }\n";

fn offered(tools: serde_json::Value) -> serde_json::Value {
    let policy = compile(POLICY);
    let defs = ToolDef::list_from_json(&tools.to_string()).unwrap();
    let offer = policy.offer(&Facts::from_value(json!({"stage": "s"})).unwrap(), &defs);
    json!(offer)["tools"].clone()
}

#[test]
fn openai_chat_completions_tools_are_offered_in_their_own_shape() {
    let parameters = json!({"type": "object", "properties": {"amount": {"type": "number"}}});
    let out = offered(json!([
        {"type": "function", "function": {"name": "pay", "description": "Pays.", "parameters": parameters, "strict": true}},
        {"type": "function", "function": {"name": "nope", "parameters": {}}}
    ]));
    let tools = out.as_array().unwrap();
    assert_eq!(tools.len(), 1, "the unclassified tool is withheld: {out}");
    let pay = &tools[0];
    assert_eq!(pay["type"], "function");
    assert!(
        pay.get("name").is_none(),
        "name stays inside `function`: {pay}"
    );
    assert_eq!(pay["function"]["name"], "pay");
    assert_eq!(pay["function"]["parameters"], parameters);
    assert_eq!(pay["function"]["strict"], true);
    let description = pay["function"]["description"].as_str().unwrap();
    assert!(
        description.starts_with("Pays.") && description.contains("at most 10"),
        "{description}"
    );
}

#[test]
fn anthropic_mcp_and_flat_openai_tools_keep_their_fields() {
    let out = offered(json!({"tools": [
        {"name": "pay", "description": "Pays.", "input_schema": {"type": "object"}},
        {"name": "look", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}
    ]}));
    assert_eq!(out[0]["input_schema"], json!({"type": "object"}));
    assert_eq!(out[1]["inputSchema"], json!({"type": "object"}));
    assert_eq!(out[1]["annotations"]["readOnlyHint"], true);
    let flat =
        offered(json!([{"type": "function", "name": "look", "parameters": {"type": "object"}}]));
    assert_eq!(flat[0]["name"], "look");
    assert_eq!(flat[0]["parameters"], json!({"type": "object"}));
}

#[test]
fn an_unknown_shape_names_the_accepted_ones() {
    for bad in [
        json!([{"tool": "pay"}]),
        json!([{"type": "function", "function": {"description": "no name"}}]),
        json!(["pay"]),
    ] {
        match ToolDef::list_from_json(&bad.to_string()) {
            Err(RequestError::Schema { path, message }) => {
                assert!(path.starts_with("[0]"), "{path}");
                for shape in ["OpenAI", "Anthropic", "MCP", "input_schema", "inputSchema"] {
                    assert!(message.contains(shape), "{message}");
                }
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[test]
fn a_tool_definition_round_trips_through_serde() {
    for def in [
        json!({"type": "function", "function": {"name": "pay", "description": "Pays.", "parameters": {}}}),
        json!({"name": "pay", "description": "Pays.", "input_schema": {"type": "object"}}),
        json!({"name": "look", "inputSchema": {}}),
    ] {
        let read: ToolDef = serde_json::from_value(def.clone()).unwrap();
        assert_eq!(serde_json::to_value(&read).unwrap(), def);
    }
}
