//! Python objects written as JSON text in Rust, for the engine's own readers: no
//! `json.dumps`, and no `serde_json::Value` tree in between (building a `Value` and reading
//! the request from it was measured 12 % slower for a batch of 4: `bench/README.md`).
//!
//! Only what `json.dumps` would write unambiguously is accepted: `dict` with `str` keys,
//! `list` and `tuple`, `str`, `int`, finite `float`, `bool` and `None`. Anything else (a
//! `datetime`, a `set`, a non-`str` key, `NaN`) is a request error naming the field, rather
//! than a value quietly changed on the way: toolgate judges exactly what it was given.
//! A dict cannot hold a key twice, so the text written never has a duplicate key.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Number;
use std::borrow::Cow;

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

/// `obj` as JSON text.
pub fn to_json(obj: &Bound<'_, PyAny>) -> Result<String, NotJson> {
    let mut out = Vec::with_capacity(512);
    write(obj, &mut out, 0)?;
    // Every byte written is ASCII punctuation, a number, or a Rust `str` escaped by
    // serde_json, so this never fails; the check costs one pass over ASCII-heavy text.
    String::from_utf8(out).map_err(|e| NotJson::new(e.to_string()))
}

fn write(obj: &Bound<'_, PyAny>, out: &mut Vec<u8>, depth: usize) -> Result<(), NotJson> {
    if depth > MAX_DEPTH {
        return Err(NotJson::new(format!(
            "nested deeper than {MAX_DEPTH} levels"
        )));
    }
    if obj.is_none() {
        out.extend_from_slice(b"null");
    } else if let Ok(s) = obj.cast::<PyString>() {
        write_str(&text(s)?, out);
    } else if let Ok(b) = obj.cast::<PyBool>() {
        out.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
    } else if let Ok(i) = obj.cast::<PyInt>() {
        out.extend_from_slice(integer(i)?.to_string().as_bytes());
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        out.extend_from_slice(finite(f.value())?.to_string().as_bytes());
    } else if let Ok(d) = obj.cast::<PyDict>() {
        out.push(b'{');
        for (n, (k, v)) in d.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            let Ok(key) = k.cast::<PyString>() else {
                return Err(NotJson::new(format!(
                    "object keys must be strings, found the {} key {}",
                    type_name(&k),
                    k.repr().map(|r| r.to_string()).unwrap_or_default()
                )));
            };
            let key = text(key)?;
            write_str(&key, out);
            out.push(b':');
            write(&v, out, depth + 1).map_err(|e| e.at(Segment::Key(key.into_owned())))?;
        }
        out.push(b'}');
    } else if let Ok(l) = obj.cast::<PyList>() {
        array(l.iter(), out, depth)?;
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        array(t.iter(), out, depth)?;
    } else {
        return Err(NotJson::new(format!(
            "expected a JSON value (dict, list, tuple, str, int, float, bool or None), found {}",
            type_name(obj)
        )));
    }
    Ok(())
}

fn array<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), NotJson> {
    out.push(b'[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(&item, out, depth + 1).map_err(|e| e.at(Segment::Index(i)))?;
    }
    out.push(b']');
    Ok(())
}

fn text<'a>(s: &'a Bound<'_, PyString>) -> Result<Cow<'a, str>, NotJson> {
    s.to_cow()
        .map_err(|e| NotJson::new(format!("a string that is not valid Unicode: {e}")))
}

fn write_str(s: &str, out: &mut Vec<u8>) {
    // serde_json's own escaping; writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// An `int` as `serde_json` reads the same digits: `i64`, else `u64`, else `f64`.
fn integer(i: &Bound<'_, PyInt>) -> Result<Number, NotJson> {
    if let Ok(v) = i.extract::<i64>() {
        return Ok(v.into());
    }
    if let Ok(v) = i.extract::<u64>() {
        return Ok(v.into());
    }
    match i.extract::<f64>() {
        Ok(v) => finite(v),
        Err(_) => Err(NotJson::new("an integer too large for a JSON number")),
    }
}

fn finite(v: f64) -> Result<Number, NotJson> {
    Number::from_f64(v).ok_or_else(|| NotJson::new(format!("expected a finite number, found {v}")))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}
