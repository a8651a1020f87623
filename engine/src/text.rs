//! Text helpers shared by the sentences the engine writes (refusals, explanations, built-in
//! descriptions). A leaf: it imports nothing from the crate, so any module may use it.

use serde_json::Value;
use toolgate_lang::ast::CallValue;

/// A JSON value's type as an error names it (`a string`, `an object`, `null`): one
/// wording for the engine's errors and those of the servers built on it.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A number as a policy writes it: whole numbers without a fraction (`250`, not `250.0`).
pub(crate) fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

/// A built-in's argument as a sentence shows it: a list as `a/b/c`.
pub(crate) fn call_value(v: &CallValue) -> String {
    match v {
        CallValue::Number(n) => number(*n),
        CallValue::String(s) | CallValue::Name(s) => s.clone(),
        CallValue::List(items) => items
            .iter()
            .map(|i| call_value(&i.node))
            .collect::<Vec<_>>()
            .join("/"),
    }
}

/// The indefinite article for `word`.
pub(crate) fn article_word(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// A JSON value for a sentence, cut at 80 characters.
pub(crate) fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}
