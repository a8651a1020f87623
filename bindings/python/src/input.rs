//! What `decide`, `offer` and `explain` accept: a `dict`, JSON text as `str`, or JSON text
//! as `bytes`. All three reach the engine's own readers as text (strict about duplicate
//! keys, with field paths); a `dict` is written as JSON in Rust ([`crate::from_python`]),
//! never through `json.dumps`.

use crate::errors::request_error;
use crate::from_python;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use std::borrow::Cow;
use toolgate_engine::{OfferRequest, Policy, Request, RequestError};

/// Reads `obj` (a `dict`, `str` or `bytes`) as JSON request text.
pub fn read<'a>(py: Python<'_>, obj: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, str>> {
    if let Ok(d) = obj.cast::<PyDict>() {
        return from_python::to_json(d.as_any())
            .map(Cow::Owned)
            .map_err(|e| {
                let path = e.path();
                let path = if path.is_empty() {
                    "(request)".to_string()
                } else {
                    path
                };
                request_error(
                    py,
                    &RequestError::Schema {
                        path,
                        message: e.message,
                    },
                )
            });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return s.to_cow();
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        let bytes = b.as_bytes();
        return match std::str::from_utf8(bytes) {
            Ok(text) => Ok(Cow::Borrowed(text)),
            Err(e) => Err(request_error(py, &not_utf8(bytes, e.valid_up_to()))),
        };
    }
    Err(PyTypeError::new_err(format!(
        "a request is a dict, or JSON text as str or bytes; found {}",
        obj.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "object".into())
    )))
}

/// The error for bytes that are not UTF-8, located like a JSON syntax error.
fn not_utf8(bytes: &[u8], valid_up_to: usize) -> RequestError {
    let before = &bytes[..valid_up_to];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    RequestError::Json {
        line,
        column,
        message: "the text is not valid UTF-8".into(),
    }
}

/// A decision request read and checked against `policy` (its module, latch names and call
/// ids), for `explain`.
pub fn request(policy: &Policy, text: &str) -> Result<Request, RequestError> {
    let request = Request::from_json(text)?;
    policy.check_request(&request)?;
    Ok(request)
}

/// An offer request read and checked against `policy` (its module and facts).
pub fn offer_request(policy: &Policy, text: &str) -> Result<OfferRequest, RequestError> {
    let offer = OfferRequest::from_json(text)?;
    // The module check lives on requests; an empty request naming the same policy runs it.
    policy.check_request(&Request {
        policy: offer.policy.clone(),
        ..Request::default()
    })?;
    policy.check_facts(&offer.facts)?;
    Ok(offer)
}
