//! `facts.principal`: who the agent acts for. Its shape is written once, here, and both
//! request readers check it with [`check`], so a principal one reader accepts the other
//! accepts too.
//!
//! The shape: an object with `sub` (the subject, a non-empty string), `tenant` (a non-empty
//! string) and `claims` (an object of any JSON), each optional, and no other key. Rules read
//! it as `principal.sub`, `principal.tenant` and `principal.claims.NAME`; a part that is
//! absent is unknown, so a rule that needs it denies. Embedded, the executor supplies it;
//! the decision server sets it from a verified bearer token and then refuses one the
//! request brings itself.

use crate::wire::schema as key;
use serde_json::{Map, Value};

/// What is wrong with a `facts.principal` value: the path below `facts.principal` (empty
/// for the value itself) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShapeError {
    pub(crate) at: String,
    pub(crate) message: String,
}

/// Checks `value` against the principal's shape.
pub(crate) fn check(value: &Value) -> Result<(), ShapeError> {
    let err = |at: &str, message: String| ShapeError {
        at: at.to_string(),
        message,
    };
    let Value::Object(map) = value else {
        return Err(err(
            "",
            format!(
                "expected an object with `sub`, `tenant` or `claims`, found {}",
                crate::text::type_name(value)
            ),
        ));
    };
    for (k, v) in map {
        match k.as_str() {
            key::SUB | key::TENANT => match v {
                Value::String(s) if !s.trim().is_empty() => {}
                Value::String(_) => {
                    return Err(err(&format!(".{k}"), "expected a non-empty string".into()))
                }
                other => {
                    return Err(err(
                        &format!(".{k}"),
                        format!("expected a string, found {}", crate::text::type_name(other)),
                    ))
                }
            },
            key::CLAIMS => {
                if !v.is_object() {
                    return Err(err(
                        ".claims",
                        format!("expected an object, found {}", crate::text::type_name(v)),
                    ));
                }
            }
            other => {
                let hint = meant(other)
                    .map(|m| format!("; did you mean `{m}`?"))
                    .unwrap_or_else(|| {
                        "; a principal has `sub`, `tenant` and `claims` (put anything else in `claims`)"
                            .to_string()
                    });
                return Err(err(&format!(".{other}"), format!("unknown field{hint}")));
            }
        }
    }
    Ok(())
}

/// The part of a principal a misspelt or longer name most likely means (`subject` and
/// `sbu` mean `sub`, `tenant_id` means `tenant`), for the did-you-mean of the request reader
/// and the compiler alike.
pub(crate) fn meant(part: &str) -> Option<&'static str> {
    let lower = part.to_ascii_lowercase();
    key::PRINCIPAL_KEYS
        .into_iter()
        .find(|k| lower.starts_with(k))
        .or_else(|| toolgate_lang::did_you_mean(part, key::PRINCIPAL_KEYS))
}

/// A principal built from its parts, in the shape [`check`] accepts: what a keeper that
/// verified a token (the decision server) puts in `facts.principal`.
pub fn principal_value(
    sub: Option<&str>,
    tenant: Option<&str>,
    claims: Option<Map<String, Value>>,
) -> Value {
    let mut m = Map::new();
    if let Some(s) = sub.filter(|s| !s.trim().is_empty()) {
        m.insert(key::SUB.into(), Value::from(s));
    }
    if let Some(t) = tenant.filter(|t| !t.trim().is_empty()) {
        m.insert(key::TENANT.into(), Value::from(t));
    }
    if let Some(c) = claims {
        m.insert(key::CLAIMS.into(), Value::Object(c));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_the_three_parts_and_refuses_anything_else() {
        assert!(check(&json!({})).is_ok());
        assert!(check(&json!({"sub": "u1", "tenant": "t", "claims": {"role": "admin"}})).is_ok());
        assert_eq!(check(&json!("u1")).unwrap_err().at, "");
        assert_eq!(check(&json!({"sub": 3})).unwrap_err().at, ".sub");
        assert_eq!(check(&json!({"sub": " "})).unwrap_err().at, ".sub");
        assert_eq!(check(&json!({"claims": []})).unwrap_err().at, ".claims");
        let e = check(&json!({"subject": "u1"})).unwrap_err();
        assert_eq!(e.at, ".subject");
        assert!(e.message.contains("did you mean `sub`"), "{}", e.message);
        let e = check(&json!({"role": "admin"})).unwrap_err();
        assert!(e.message.contains("claims"), "{}", e.message);
    }

    #[test]
    fn a_value_built_from_parts_has_the_shape() {
        let mut claims = Map::new();
        claims.insert("role".into(), json!("admin"));
        let v = principal_value(Some("u1"), Some(""), Some(claims));
        assert!(check(&v).is_ok());
        assert_eq!(v, json!({"sub": "u1", "claims": {"role": "admin"}}));
    }
}
