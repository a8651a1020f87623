//! Python objects read directly into `serde_json::Value`, with no JSON text in between.
//!
//! Only what `json.dumps` would write unambiguously is accepted: `dict` with `str` keys,
//! `list` and `tuple`, `str`, `int`, finite `float`, `bool` and `None`. Anything else (a
//! `datetime`, a `set`, a non-`str` key, `NaN`) is a request error naming the field, rather
//! than a value quietly changed on the way: toolgate judges exactly what it was given.
//! A dict cannot hold a key twice, so the duplicate-key check of JSON text has nothing to do
//! here.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// The deepest nesting accepted, the same limit `serde_json` puts on JSON text, so a
/// self-referencing dict is an error and not a stack overflow.
pub const MAX_DEPTH: usize = 128;

/// Why a Python object is not a JSON value, and where (segments innermost first).
#[derive(Debug)]
pub struct NotJson {
    /// The path from the value handed in to the offending one, innermost segment first.
    segments: Vec<Segment>,
    /// What is wrong there.
    pub message: String,
}

#[derive(Debug)]
enum Segment {
    Key(String),
    Index(usize),
}

impl NotJson {
    fn new(message: impl Into<String>) -> Self {
        NotJson {
            segments: Vec::new(),
            message: message.into(),
        }
    }

    fn at(mut self, segment: Segment) -> Self {
        self.segments.push(segment);
        self
    }

    /// The path as the engine writes field paths: `calls[0].args.when`.
    pub fn path(&self) -> String {
        let mut out = String::new();
        for segment in self.segments.iter().rev() {
            match segment {
                Segment::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Segment::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }
}

/// Reads `obj` as a JSON value.
pub fn to_value(obj: &Bound<'_, PyAny>) -> Result<Value, NotJson> {
    read(obj, 0)
}

fn read(obj: &Bound<'_, PyAny>, depth: usize) -> Result<Value, NotJson> {
    if depth > MAX_DEPTH {
        return Err(NotJson::new(format!(
            "nested deeper than {MAX_DEPTH} levels"
        )));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(text(s)?));
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        return integer(i);
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return finite(f.value());
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let key = match k.cast::<PyString>() {
                Ok(s) => text(s)?,
                Err(_) => {
                    return Err(NotJson::new(format!(
                        "object keys must be strings, found the {} key {}",
                        type_name(&k),
                        k.repr().map(|r| r.to_string()).unwrap_or_default()
                    )))
                }
            };
            match read(&v, depth + 1) {
                Ok(value) => {
                    map.insert(key, value);
                }
                Err(e) => return Err(e.at(Segment::Key(key))),
            }
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return array(l.iter(), l.len(), depth);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return array(t.iter(), t.len(), depth);
    }
    Err(NotJson::new(format!(
        "expected a JSON value (dict, list, tuple, str, int, float, bool or None), found {}",
        type_name(obj)
    )))
}

fn array<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    len: usize,
    depth: usize,
) -> Result<Value, NotJson> {
    let mut out = Vec::with_capacity(len);
    for (i, item) in items.enumerate() {
        out.push(read(&item, depth + 1).map_err(|e| e.at(Segment::Index(i)))?);
    }
    Ok(Value::Array(out))
}

fn text(s: &Bound<'_, PyString>) -> Result<String, NotJson> {
    s.to_cow()
        .map(|c| c.into_owned())
        .map_err(|e| NotJson::new(format!("a string that is not valid Unicode: {e}")))
}

/// An `int` as `serde_json` reads the same digits: `i64`, else `u64`, else `f64`.
fn integer(i: &Bound<'_, PyInt>) -> Result<Value, NotJson> {
    if let Ok(v) = i.extract::<i64>() {
        return Ok(Value::Number(v.into()));
    }
    if let Ok(v) = i.extract::<u64>() {
        return Ok(Value::Number(v.into()));
    }
    match i.extract::<f64>() {
        Ok(v) => finite(v),
        Err(_) => Err(NotJson::new("an integer too large for a JSON number")),
    }
}

fn finite(v: f64) -> Result<Value, NotJson> {
    Number::from_f64(v)
        .map(Value::Number)
        .ok_or_else(|| NotJson::new(format!("expected a finite number, found {v}")))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}
