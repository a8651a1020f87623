//! Strict JSON: a key given twice in one object is an error, never "last one wins".
//!
//! JSON readers disagree on duplicate keys: serde_json and Python keep the last, others keep
//! the first, some refuse. If toolgate judged `{"tool": "lookup", "tool": "payout"}` as one
//! call and the executor ran the other, the decision would be about a call that never runs.
//! So every text toolgate reads into a request, an offer or a tool list goes through
//! [`parse`], which builds the same `serde_json::Value` but refuses a repeated key with its
//! path (`calls[0].args.amount`).
//!
//! Keys are compared after escapes are decoded (`"\u0074ool"` is `"tool"`).

use crate::error::RequestError;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::fmt;

/// Parses JSON text into a value, refusing duplicate keys anywhere.
///
/// Bad JSON is [`RequestError::Json`] with serde_json's line and column; a repeated key is
/// [`RequestError::DuplicateKey`] with its path and position.
pub fn parse(text: &str) -> Result<Value, RequestError> {
    let trail = Trail::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let value = ValueSeed {
        trail: Some(&trail),
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    value.map_err(|e| match trail.into_path() {
        Some(path) => RequestError::DuplicateKey {
            path,
            line: e.line(),
            column: e.column(),
        },
        None => RequestError::Json {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        },
    })
}

/// Reads one value from any serde deserializer, refusing duplicate keys (for `Deserialize`
/// impls); the error names the path.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    let trail = Trail::default();
    let result = ValueSeed {
        trail: Some(&trail),
    }
    .deserialize(d);
    result.map_err(|e| match trail.into_path() {
        Some(path) => de::Error::custom(format!("the key `{path}` is given twice")),
        None => e,
    })
}

/// The path to a duplicate key, built innermost first as the error unwinds. Empty until a
/// duplicate is found, so a syntax error leaves it empty and costs nothing.
#[derive(Default)]
struct Trail {
    segments: RefCell<Vec<Segment>>,
}

enum Segment {
    Key(String),
    Index(usize),
}

impl Trail {
    /// Records the duplicate `key` itself.
    fn found(&self, key: &str) {
        self.segments
            .borrow_mut()
            .push(Segment::Key(key.to_owned()));
    }

    /// Records that the error came from inside `key`, if it is a duplicate's error.
    fn inside_key(&self, key: &str) {
        let mut segments = self.segments.borrow_mut();
        if !segments.is_empty() {
            segments.push(Segment::Key(key.to_owned()));
        }
    }

    fn inside_index(&self, i: usize) {
        let mut segments = self.segments.borrow_mut();
        if !segments.is_empty() {
            segments.push(Segment::Index(i));
        }
    }

    /// The path, outermost first, in the request schema's notation: `.key` for plain keys,
    /// `["a.b"]` for any other, `[3]` for an index. `None` when no duplicate was found.
    fn into_path(self) -> Option<String> {
        let segments = self.segments.into_inner();
        if segments.is_empty() {
            return None;
        }
        let mut path = String::new();
        for segment in segments.iter().rev() {
            match segment {
                Segment::Index(i) => path.push_str(&format!("[{i}]")),
                Segment::Key(k) if is_plain_key(k) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                }
                Segment::Key(k) => {
                    path.push('[');
                    path.push_str(&Value::from(k.as_str()).to_string());
                    path.push(']');
                }
            }
        }
        Some(path)
    }
}

/// A key that reads unambiguously after a dot.
fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Builds a `serde_json::Value`, refusing a repeated key in any object.
pub(crate) struct ValueSeed<'t> {
    /// Where the path of a duplicate is recorded; `None` when only the verdict matters.
    trail: Option<&'t Trail>,
}

impl ValueSeed<'static> {
    /// A seed that refuses duplicates without recording where (the fast reader's: on any
    /// error the strict reader reads the text again and names the path).
    pub(crate) fn unexplained() -> Self {
        ValueSeed { trail: None }
    }
}

fn duplicate<E: de::Error>() -> E {
    E::custom("duplicate key")
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        loop {
            let index = items.len();
            match seq.next_element_seed(ValueSeed { trail: self.trail }) {
                Ok(Some(v)) => items.push(v),
                Ok(None) => return Ok(Value::Array(items)),
                Err(e) => {
                    if let Some(t) = self.trail {
                        t.inside_index(index);
                    }
                    return Err(e);
                }
            }
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                if let Some(t) = self.trail {
                    t.found(&key);
                }
                return Err(duplicate());
            }
            match map.next_value_seed(ValueSeed { trail: self.trail }) {
                Ok(v) => {
                    out.insert(key, v);
                }
                Err(e) => {
                    if let Some(t) = self.trail {
                        t.inside_key(&key);
                    }
                    return Err(e);
                }
            }
        }
        Ok(Value::Object(out))
    }
}
