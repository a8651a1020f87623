//! `facts.outputs`: the outputs of a turn's earlier calls. Its shape is written once, here,
//! and both request readers check it with [`check_outputs`], so an outputs list one reader
//! accepts the other accepts too. What the engine makes of them: the `provenance` module.

use serde_json::Value;

/// What is wrong with a `facts.outputs` value: the path below `facts.outputs` and the
/// message. Both request readers check with [`check_outputs`], so they accept the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShapeError {
    pub(crate) at: String,
    pub(crate) message: String,
}

/// Checks `value` against the shape of `facts.outputs` for a keeper that takes outputs apart
/// from a request (a server's `POST /v1/outputs`): the error names the path below `at`, as
/// the request readers name `facts.outputs[..]`.
pub fn validate_outputs(value: &Value, at: &str) -> Result<(), crate::RequestError> {
    check_outputs(value).map_err(|e| crate::RequestError::Schema {
        path: format!("{at}{}", e.at),
        message: e.message,
    })
}

/// Checks `value` against the shape of `facts.outputs`: a list of objects, each with a
/// string `id`, a string `tool` and an `output` of any JSON, and no other key.
pub(crate) fn check_outputs(value: &Value) -> Result<(), ShapeError> {
    use crate::wire::schema::{ID, OUTPUT, OUTPUT_KEYS, TOOL};
    let err = |at: String, message: String| ShapeError { at, message };
    let Value::Array(items) = value else {
        return Err(err(
            String::new(),
            format!("expected an array, found {}", crate::text::type_name(value)),
        ));
    };
    for (i, item) in items.iter().enumerate() {
        let Value::Object(map) = item else {
            return Err(err(
                format!("[{i}]"),
                format!(
                    "expected an object with `id`, `tool` and `output`, found {}",
                    crate::text::type_name(item)
                ),
            ));
        };
        if let Some(k) = map.keys().find(|k| !OUTPUT_KEYS.contains(&k.as_str())) {
            let hint = toolgate_lang::did_you_mean(k, OUTPUT_KEYS)
                .map(|m| format!(" (did you mean `{m}`?)"))
                .unwrap_or_default();
            return Err(err(
                format!("[{i}].{k}"),
                format!("unknown key; an output has `id`, `tool` and `output`{hint}"),
            ));
        }
        for k in [ID, TOOL] {
            match map.get(k) {
                Some(Value::String(_)) => {}
                Some(other) => {
                    return Err(err(
                        format!("[{i}].{k}"),
                        format!("expected a string, found {}", crate::text::type_name(other)),
                    ))
                }
                None => return Err(err(format!("[{i}]"), format!("missing `{k}`"))),
            }
        }
        if !map.contains_key(OUTPUT) {
            return Err(err(format!("[{i}]"), format!("missing `{OUTPUT}`")));
        }
    }
    Ok(())
}
