//! The generated copies of the wire schema: the JSON Schemas of a request and a response
//! (`toolgate_engine::json_schema`, derived from the Rust types), and, written from those
//! two schemas, the TypeScript declarations of the Node package and the Python type stubs
//! of the Python package. `tests/tests/wire_schema.rs` compares every one with its
//! checked-in copy and rewrites them under `TOOLGATE_BLESS=1`.
//!
//! The writers understand the part of JSON Schema that schemars produces for the wire types
//! (`$ref` into `$defs`, `type` and type lists, `anyOf`/`oneOf`, `const`, `items`,
//! `properties`/`required`/`additionalProperties`); anything else is an error naming the
//! schema, so a new construct is noticed rather than written as `any`.

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The command that rewrites every generated copy.
pub const BLESS: &str = "TOOLGATE_BLESS=1 cargo test -p toolgate-tests --test it wire_schema::";

/// One generated file: its path from the repository root and its whole text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artefact {
    /// The path from the repository root.
    pub path: &'static str,
    /// The text the file must hold.
    pub text: String,
}

/// The name a schema definition (a Rust type) has in the generated declarations, where it
/// differs: the request is `DecideRequest` beside the package's `OfferRequest`, and the
/// latch state keeps the name the packages have always used.
const RENAMES: [(&str, &str); 2] = [("Request", "DecideRequest"), ("Latched", "LatchState")];

/// Every generated file, from the two schemas.
pub fn artefacts() -> Result<Vec<Artefact>, String> {
    let request = toolgate_engine::json_schema::request();
    let response = toolgate_engine::json_schema::response();
    let types = Types::of(&request, &response)?;
    Ok(vec![
        Artefact {
            path: "docs/wire/request.schema.json",
            text: pretty(&request)?,
        },
        Artefact {
            path: "docs/wire/response.schema.json",
            text: pretty(&response)?,
        },
        Artefact {
            path: "bindings/node/wire.d.ts",
            text: typescript(&types)?,
        },
        Artefact {
            path: "bindings/python/python/toolgate/_wire.pyi",
            text: python(&types)?,
        },
    ])
}

/// The names the generated declarations give the wire types (`DecideRequest`, `Facts`,
/// `Decision`, ...): what the hand-written `index.d.ts` and `_native.pyi` must take from the
/// generated files rather than declare again.
pub fn declared_names() -> Result<Vec<String>, String> {
    let request = toolgate_engine::json_schema::request();
    let response = toolgate_engine::json_schema::response();
    let types = Types::of(&request, &response)?;
    Ok(types
        .named
        .keys()
        .map(|n| declared(n).to_string())
        .collect())
}

fn pretty(schema: &Value) -> Result<String, String> {
    serde_json::to_string_pretty(schema)
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// The named types of both schemas: each root under its title, and every definition. A
/// definition both schemas hold (the latch state) must be the same in both.
struct Types {
    named: BTreeMap<String, Value>,
}

impl Types {
    fn of(request: &Value, response: &Value) -> Result<Self, String> {
        let mut named = BTreeMap::new();
        for root in [request, response] {
            let title = root
                .get("title")
                .and_then(Value::as_str)
                .ok_or("a root schema has no title")?;
            let mut body = root.clone();
            if let Value::Object(m) = &mut body {
                for k in ["$defs", "$schema", "title"] {
                    m.remove(k);
                }
            }
            named.insert(title.to_string(), body);
            if let Some(Value::Object(defs)) = root.get("$defs") {
                for (name, def) in defs {
                    if let Some(earlier) = named.get(name) {
                        if earlier != def {
                            return Err(format!(
                                "`{name}` differs between the request and the response schema"
                            ));
                        }
                    }
                    named.insert(name.clone(), def.clone());
                }
            }
        }
        Ok(Types { named })
    }
}

/// The declared name of a definition.
fn declared(name: &str) -> &str {
    RENAMES
        .iter()
        .find(|(from, _)| *from == name)
        .map(|(_, to)| *to)
        .unwrap_or(name)
}

/// The definition a `$ref` points at.
fn ref_name(r: &str) -> Result<&str, String> {
    r.strip_prefix("#/$defs/")
        .ok_or_else(|| format!("a $ref outside $defs: {r}"))
}

fn description(schema: &Value) -> Option<&str> {
    schema.get("description").and_then(Value::as_str)
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

fn required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The alternatives of a union schema (`anyOf`, `oneOf`), if it is one.
fn alternatives(schema: &Value) -> Option<&Vec<Value>> {
    schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array)
}

/// The schema's `type`s: one, a list, or none.
fn type_list(schema: &Value) -> Result<Vec<&str>, String> {
    match schema.get("type") {
        None => Ok(Vec::new()),
        Some(Value::String(t)) => Ok(vec![t.as_str()]),
        Some(Value::Array(ts)) => ts
            .iter()
            .map(|t| {
                t.as_str()
                    .ok_or_else(|| format!("a type that is not a name: {t}"))
            })
            .collect(),
        Some(other) => Err(format!("a type that is not a name: {other}")),
    }
}

/// What a map's values may be: `None` for any JSON.
fn map_values(schema: &Value) -> Option<&Value> {
    match schema.get("additionalProperties") {
        Some(Value::Object(m)) if !m.is_empty() => schema.get("additionalProperties"),
        _ => None,
    }
}

/// How one language writes types; `expr` is shared.
trait Lang {
    fn any(&self) -> String;
    fn null(&self) -> String;
    fn string(&self) -> String;
    fn number(&self) -> String;
    fn integer(&self) -> String;
    fn boolean(&self) -> String;
    fn literal(&self, v: &Value) -> Result<String, String>;
    fn list(&self, item: String) -> String;
    fn map(&self, value: Option<String>) -> String;
    fn union(&self, parts: Vec<String>) -> String;
}

/// The type expression for `schema` (a property's, an item's, a definition's body that is
/// not an object with properties).
fn expr(lang: &dyn Lang, schema: &Value) -> Result<String, String> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return Ok(declared(ref_name(r)?).to_string());
    }
    if let Some(c) = schema.get("const") {
        return lang.literal(c);
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let parts = values
            .iter()
            .map(|v| lang.literal(v))
            .collect::<Result<_, _>>()?;
        return Ok(lang.union(parts));
    }
    if let Some(alts) = alternatives(schema) {
        let parts = alts
            .iter()
            .map(|a| expr(lang, a))
            .collect::<Result<_, _>>()?;
        return Ok(lang.union(parts));
    }
    if properties(schema).is_some() {
        return Err(format!(
            "an object with properties outside $defs (give it a name): {schema}"
        ));
    }
    let types = type_list(schema)?;
    if types.is_empty() {
        return Ok(lang.any());
    }
    let parts = types
        .into_iter()
        .map(|t| match t {
            "string" => Ok(lang.string()),
            "number" => Ok(lang.number()),
            "integer" => Ok(lang.integer()),
            "boolean" => Ok(lang.boolean()),
            "null" => Ok(lang.null()),
            "array" => {
                let item = match schema.get("items") {
                    Some(items) => expr(lang, items)?,
                    None => lang.any(),
                };
                Ok(lang.list(item))
            }
            "object" => {
                let value = map_values(schema).map(|v| expr(lang, v)).transpose()?;
                Ok(lang.map(value))
            }
            other => Err(format!("a type the writers do not know: {other}")),
        })
        .collect::<Result<_, _>>()?;
    Ok(lang.union(parts))
}

/// The alternatives of a union of string constants, each with its description, if
/// `schema` is one: an enum whose variants are documented.
fn documented_consts(schema: &Value) -> Option<Vec<(&Value, Option<&str>)>> {
    let alts = alternatives(schema)?;
    let consts: Option<Vec<_>> = alts
        .iter()
        .map(|a| a.get("const").map(|c| (c, description(a))))
        .collect();
    consts.filter(|c| c.iter().any(|(_, d)| d.is_some()))
}

/// Breaks `text` into lines of at most `width` characters (a longer word stands alone).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

// TypeScript.

struct Ts;

impl Lang for Ts {
    fn any(&self) -> String {
        "Json".into()
    }
    fn null(&self) -> String {
        "null".into()
    }
    fn string(&self) -> String {
        "string".into()
    }
    fn number(&self) -> String {
        "number".into()
    }
    fn integer(&self) -> String {
        "number".into()
    }
    fn boolean(&self) -> String {
        "boolean".into()
    }
    fn literal(&self, v: &Value) -> Result<String, String> {
        match v {
            Value::String(s) => Ok(format!("'{s}'")),
            Value::Bool(_) | Value::Number(_) | Value::Null => Ok(v.to_string()),
            other => Err(format!("a literal the writers do not know: {other}")),
        }
    }
    fn list(&self, item: String) -> String {
        if item.contains(' ') {
            format!("({item})[]")
        } else {
            format!("{item}[]")
        }
    }
    fn map(&self, value: Option<String>) -> String {
        format!(
            "{{ [key: string]: {} }}",
            value.unwrap_or_else(|| self.any())
        )
    }
    fn union(&self, parts: Vec<String>) -> String {
        parts.join(" | ")
    }
}

fn ts_doc(out: &mut String, indent: &str, text: Option<&str>) {
    let Some(text) = text else { return };
    let text = text.replace("*/", "*\\/");
    let lines = wrap(&text, 96 - indent.len());
    if lines.len() == 1 {
        let _ = writeln!(out, "{indent}/** {} */", lines[0]);
    } else {
        let _ = writeln!(out, "{indent}/**");
        for l in lines {
            let _ = writeln!(out, "{indent} * {l}");
        }
        let _ = writeln!(out, "{indent} */");
    }
}

fn ts_key(name: &str) -> String {
    let plain = name.chars().enumerate().all(|(i, c)| {
        c == '_' || c == '$' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())
    });
    if plain && !name.is_empty() {
        name.to_string()
    } else {
        format!("'{name}'")
    }
}

/// `bindings/node/wire.d.ts`.
fn typescript(types: &Types) -> Result<String, String> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// The wire types of toolgate: a decision request and its response, as JSON.\n\
         // Generated from the engine's Rust types (docs/wire/*.schema.json); do not edit.\n\
         // Regenerate: {BLESS}\n"
    );
    out.push_str("/** Arguments, fields, custom facts: JSON data. */\n");
    out.push_str(
        "export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };\n",
    );
    for (name, schema) in &types.named {
        out.push('\n');
        ts_doc(&mut out, "", description(schema));
        let declared = declared(name);
        match properties(schema) {
            Some(props) => {
                let required = required(schema);
                let _ = writeln!(out, "export type {declared} = {{");
                for (key, prop) in props {
                    ts_doc(&mut out, "  ", description(prop));
                    let optional = if required.contains(&key.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    let _ = writeln!(out, "  {}{optional}: {};", ts_key(key), expr(&Ts, prop)?);
                }
                match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {}
                    Some(Value::Bool(true)) | None => {
                        out.push_str("  /** Any other key: the executor's own data. */\n");
                        out.push_str("  [key: string]: Json | undefined;\n");
                    }
                    Some(other) => {
                        return Err(format!("`{name}`: typed additional properties: {other}"))
                    }
                }
                out.push_str("};\n");
            }
            None => match documented_consts(schema) {
                Some(consts) => {
                    let _ = writeln!(out, "export type {declared} =");
                    for (c, doc) in consts {
                        ts_doc(&mut out, "  ", doc);
                        let _ = writeln!(out, "  | {}", Ts.literal(c)?);
                    }
                    out.pop();
                    out.push_str(";\n");
                }
                None => {
                    let _ = writeln!(out, "export type {declared} = {};", expr(&Ts, schema)?);
                }
            },
        }
    }
    Ok(out)
}

// Python.

struct Py;

impl Lang for Py {
    fn any(&self) -> String {
        "Any".into()
    }
    fn null(&self) -> String {
        "None".into()
    }
    fn string(&self) -> String {
        "str".into()
    }
    fn number(&self) -> String {
        "float".into()
    }
    fn integer(&self) -> String {
        "int".into()
    }
    fn boolean(&self) -> String {
        "bool".into()
    }
    fn literal(&self, v: &Value) -> Result<String, String> {
        match v {
            Value::String(s) => Ok(format!("Literal[{}]", Value::from(s.as_str()))),
            other => Err(format!("a literal the writers do not know: {other}")),
        }
    }
    fn list(&self, item: String) -> String {
        format!("List[{item}]")
    }
    fn map(&self, value: Option<String>) -> String {
        format!("Dict[str, {}]", value.unwrap_or_else(|| self.any()))
    }
    fn union(&self, parts: Vec<String>) -> String {
        // Literal["a"] | Literal["b"] reads better as Literal["a", "b"].
        if parts.len() > 1 && parts.iter().all(|p| p.starts_with("Literal[")) {
            let inner: Vec<&str> = parts
                .iter()
                .map(|p| &p["Literal[".len()..p.len() - 1])
                .collect();
            return format!("Literal[{}]", inner.join(", "));
        }
        match parts.as_slice() {
            [one] => one.clone(),
            [one, none] if none == "None" => format!("Optional[{one}]"),
            _ => format!("Union[{}]", parts.join(", ")),
        }
    }
}

fn py_comment(out: &mut String, indent: &str, text: Option<&str>) {
    let Some(text) = text else { return };
    for l in wrap(text, 96 - indent.len()) {
        let _ = writeln!(out, "{indent}# {l}");
    }
}

/// `bindings/python/python/toolgate/_wire.pyi`: `TypedDict`s in the functional form, since
/// a message has a key named `from`.
fn python(types: &Types) -> Result<String, String> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\"\"\"The wire types of toolgate: a decision request and its response, as the dicts\n\
         ``Policy.decide`` takes and returns. A stub only (no module at run time): import it under\n\
         ``typing.TYPE_CHECKING``.\n\n\
         Generated from the engine's Rust types (docs/wire/*.schema.json); do not edit.\n\
         Regenerate: {BLESS}\n\"\"\"\n\n\
         from typing import Any, Dict, List, Literal, Optional, Union\n\n\
         from typing_extensions import NotRequired, TypedDict"
    );
    for (name, schema) in &types.named {
        out.push_str("\n\n");
        let declared = declared(name);
        match properties(schema) {
            Some(props) => {
                let required = required(schema);
                let _ = writeln!(out, "{declared} = TypedDict(\n    {declared:?},\n    {{");
                for (key, prop) in props {
                    py_comment(&mut out, "        ", description(prop));
                    let ty = expr(&Py, prop)?;
                    let ty = if required.contains(&key.as_str()) {
                        ty
                    } else {
                        format!("NotRequired[{ty}]")
                    };
                    let _ = writeln!(out, "        {}: {ty},", Value::from(key.as_str()));
                }
                out.push_str("    },\n)\n");
            }
            None => match documented_consts(schema) {
                Some(consts) => {
                    let _ = writeln!(out, "{declared} = Literal[");
                    for (c, doc) in consts {
                        py_comment(&mut out, "    ", doc);
                        let _ = writeln!(out, "    {c},");
                    }
                    out.push_str("]\n");
                }
                None => {
                    let _ = writeln!(out, "{declared} = {}", expr(&Py, schema)?);
                }
            },
        }
        if let Some(text) = description(schema) {
            let mut text = text.replace('\\', "\\\\").replace("\"\"\"", "'''");
            if matches!(
                schema.get("additionalProperties"),
                Some(Value::Bool(true)) | None
            ) && properties(schema).is_some()
            {
                text.push_str(
                    " Any other key is the executor's own data (a TypedDict cannot say so).",
                );
            }
            let lines = wrap(&text, 92);
            let _ = writeln!(out, "\"\"\"{}\"\"\"", lines.join("\n"));
        }
    }
    Ok(out)
}
