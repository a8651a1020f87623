//! The tool-definition shapes executors already have, read into one [`ToolDef`] and written
//! back in the shape they came in:
//!
//! - Anthropic (and toolgate's own): `{"name", "description", "input_schema"}`;
//! - MCP `tools/list`: `{"name", "description", "inputSchema", "annotations"}` (the extra
//!   fields pass through in `extra`);
//! - OpenAI Responses: `{"type": "function", "name", "description", "parameters"}` (likewise);
//! - OpenAI Chat Completions: `{"type": "function", "function": {"name", "description",
//!   "parameters"}}`. Its `name` and `description` are read from `function`; the rest of
//!   `function` stays in `extra["function"]`, and the definition is written back wrapped, so
//!   an executor gets back what it sent, with the description the offer gives.

use super::ToolDef;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// What a tool definition may look like, for errors that must say so.
pub(crate) const ACCEPTED: &str = "a tool definition is one of: OpenAI's \
    `{\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}}` (or \
    the flat `{\"type\": \"function\", \"name\", ..}`), Anthropic's `{\"name\", \"description\", \
    \"input_schema\"}`, or an MCP `tools/list` entry `{\"name\", \"description\", \"inputSchema\"}`";

/// For an OpenAI Chat Completions definition (`type` is `function`, `function` an object, no
/// `name` of its own): moves `name` and `description` out of `function` to the top, where
/// the reader takes them. Anything else is left as it is.
pub(crate) fn unwrap_openai(map: &mut Map<String, Value>) {
    if map.contains_key("name") || map.get("type").and_then(Value::as_str) != Some("function") {
        return;
    }
    let Some(Value::Object(function)) = map.get_mut("function") else {
        return;
    };
    let name = function.remove("name");
    let description = function.remove("description");
    if let Some(n) = name {
        map.insert("name".into(), n);
    }
    if let Some(d) = description {
        map.insert("description".into(), d);
    }
}

/// True when `def` was read from the Chat Completions shape (see [`unwrap_openai`]).
fn is_wrapped(def: &ToolDef) -> bool {
    def.extra.get("type").and_then(Value::as_str) == Some("function")
        && matches!(def.extra.get("function"), Some(Value::Object(_)))
}

impl Serialize for ToolDef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_map(None)?;
        if is_wrapped(self) {
            let mut function = Map::new();
            function.insert("name".into(), Value::String(self.name.clone()));
            if let Some(d) = &self.description {
                function.insert("description".into(), Value::String(d.clone()));
            }
            if let Some(Value::Object(rest)) = self.extra.get("function") {
                function.extend(rest.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            for (k, v) in &self.extra {
                if k == "function" {
                    out.serialize_entry(k, &function)?;
                } else {
                    out.serialize_entry(k, v)?;
                }
            }
            if let Some(schema) = &self.input_schema {
                out.serialize_entry("input_schema", schema)?;
            }
            return out.end();
        }
        out.serialize_entry("name", &self.name)?;
        if let Some(d) = &self.description {
            out.serialize_entry("description", d)?;
        }
        if let Some(schema) = &self.input_schema {
            out.serialize_entry("input_schema", schema)?;
        }
        for (k, v) in &self.extra {
            out.serialize_entry(k, v)?;
        }
        out.end()
    }
}

impl<'de> serde::Deserialize<'de> for ToolDef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        ToolDef::from_value(value, "").map_err(serde::de::Error::custom)
    }
}
