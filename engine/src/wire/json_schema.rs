//! The JSON Schema of the wire (feature `json-schema`): a decision request as the strict
//! reader accepts it, and a response as [`crate::Policy::decide`] writes it.
//!
//! Both are derived (`schemars`) from the Rust types themselves, [`crate::Request`] and
//! [`crate::Response`] with everything they hold, so a field added to either type is in the
//! schema. Where a type keeps a part of the request as raw JSON (`facts.principal`,
//! `facts.outputs`) or the reader accepts more than the Rust type holds (`null` for an absent
//! fact, a message's unread `text`), the field names its wire shape with a schema-only type
//! below. What JSON Schema cannot say is left to the readers: a `latched` name the policy
//! does not declare, two calls with one id, a custom fact named like a misspelt standard
//! fact.
//!
//! The generated copies (`docs/wire/*.schema.json`, the Node and Python declarations) are
//! written from [`request`] and [`response`] by `tests/tests/wire_schema.rs`, which fails
//! when a checked-in copy differs.

use schemars::generate::SchemaSettings;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;
use std::borrow::Cow;

/// The JSON Schema (draft 2020-12) of a decision request: every object but `facts`, `args`,
/// `fields` and `principal.claims` closed, `null` accepted wherever the reader reads it as
/// absent.
pub fn request() -> Value {
    let mut schema: Value = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<crate::Request>()
        .into();
    tidy_descriptions(&mut schema);
    schema
}

/// The JSON Schema (draft 2020-12) of a response as the engine writes it: every object
/// closed; an optional field is left out when empty, never written as `null`.
pub fn response() -> Value {
    let mut schema: Value = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<crate::Response>()
        .into();
    drop_null_from_optional(&mut schema);
    tidy_descriptions(&mut schema);
    schema
}

/// Every `description` (a Rust doc comment) as one paragraph for a reader of JSON: its
/// lines joined, and a rustdoc link (`` [`crate::Policy::check_request`] ``) written as the
/// plain name in code (`` `Policy::check_request` ``).
fn tidy_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match v {
                    Value::String(text) if k == "description" => *text = tidy(text),
                    other => tidy_descriptions(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_descriptions),
        _ => {}
    }
}

/// One doc comment as one paragraph, rustdoc links unwrapped.
fn tidy(text: &str) -> String {
    let joined = text
        .split('\n')
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = String::with_capacity(joined.len());
    let mut rest = joined.as_str();
    while let Some(start) = rest.find("[`") {
        let Some(len) = rest[start + 2..].find("`]") else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push('`');
        out.push_str(&rest[start + 2..start + 2 + len]);
        out.push('`');
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    out.replace("`crate::", "`")
}

/// Every optional property of every object in a serialize-contract schema loses its `null`
/// alternative: an optional response field is one with `skip_serializing_if` (schemars makes
/// the others required), and each of those skips exactly `None`, so `null` is never written.
fn drop_null_from_optional(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let required: Vec<String> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            if let Some(Value::Object(props)) = map.get_mut("properties") {
                for (name, prop) in props.iter_mut() {
                    if !required.contains(name) {
                        drop_null(prop);
                    }
                }
            }
            for v in map.values_mut() {
                drop_null_from_optional(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_from_optional),
        _ => {}
    }
}

/// `{"type": [T, "null"]}` to `{"type": T}`; `{"anyOf": [S, {"type": "null"}]}` to `S`.
fn drop_null(prop: &mut Value) {
    let Value::Object(map) = prop else { return };
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
        return;
    }
    let is_null = |v: &Value| v.get("type").and_then(Value::as_str) == Some("null");
    if let Some(Value::Array(alternatives)) = map.get_mut("anyOf") {
        alternatives.retain(|v| !is_null(v));
        if alternatives.len() == 1 {
            let only = alternatives.remove(0);
            map.remove("anyOf");
            if let Value::Object(inner) = only {
                for (k, v) in inner {
                    map.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// A schema-only type: an approval digest in `facts.approvals`.
pub(crate) struct ApprovalDigest;

impl JsonSchema for ApprovalDigest {
    fn schema_name() -> Cow<'static, str> {
        "ApprovalDigest".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "An ask's `approval` digest: `ap1:` and 64 lowercase hex digits. In `facts.approvals` it allows exactly the call that asked for it.",
            "type": "string",
            "pattern": "^ap1:[0-9a-f]{64}$",
        })
    }
}

/// A schema-only type: what a budget over batches consumed (`facts.spent`, a response's
/// `spent`): a number of at least 0.
pub(crate) struct Count;

impl JsonSchema for Count {
    fn schema_name() -> Cow<'static, str> {
        "Count".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "What a budget over batches consumed: a number of at least 0.",
            "type": "number",
            "minimum": 0,
        })
    }
}

/// A schema-only type: the shape of `facts.principal` ([`crate::wire::principal`]).
pub(crate) struct Principal;

impl JsonSchema for Principal {
    fn schema_name() -> Cow<'static, str> {
        "Principal".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Who the agent acts for. Rules read it as `principal.sub`, `principal.tenant` and `principal.claims.NAME`; a part that is absent is unknown, so a rule that needs it denies.",
            "type": "object",
            "properties": {
                "sub": {
                    "description": "The subject: a string with a visible character.",
                    "type": "string",
                    "pattern": "\\S",
                },
                "tenant": {
                    "description": "The tenant: a string with a visible character.",
                    "type": "string",
                    "pattern": "\\S",
                },
                "claims": {
                    "description": "Any other claims, as JSON.",
                    "type": "object",
                    "additionalProperties": true,
                },
            },
            "additionalProperties": false,
        })
    }
}

/// A schema-only type: one entry of `facts.outputs` ([`crate::wire::outputs`]).
pub(crate) struct Output;

impl JsonSchema for Output {
    fn schema_name() -> Cow<'static, str> {
        "Output".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The output of an earlier call of this turn, for `from ingest`, `mentions ingest` and `blocks tainted`.",
            "type": "object",
            "properties": {
                "id": { "description": "The call's id.", "type": "string" },
                "tool": { "description": "The call's tool.", "type": "string" },
                "output": { "description": "What it returned, any JSON." },
            },
            "required": ["id", "tool", "output"],
            "additionalProperties": false,
        })
    }
}

impl JsonSchema for crate::CallLabel {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "CallLabel".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string" })
    }
}

/// A message's `text`, which the Rust [`crate::Message`] does not keep: accepted so an
/// executor can send its transcript as it is, never read.
pub(crate) fn message_text(schema: &mut Schema) {
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.insert(
            crate::wire::schema::TEXT.into(),
            serde_json::json!({
                "description": "The message's text: accepted so a transcript can be sent as it is, never read."
            }),
        );
    }
}
