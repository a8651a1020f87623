//! Caps on what a client may send, checked before any parsing work is spent on it.

use super::api_error::ApiError;
use toolgate_engine::{OfferRequest, Request};

/// Size caps for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest body, in bytes.
    pub body_bytes: usize,
    /// Largest hook event body (`/v1/hooks`), in bytes: an agent sends a whole file's
    /// content with a write, and one over the limit is answered with a denial.
    pub hook_body_bytes: usize,
    /// Most calls in one batch.
    pub calls: usize,
    /// Most messages in `facts.messages`.
    pub messages: usize,
    /// Most tool definitions in one `/v1/offer` request.
    pub tools: usize,
    /// Deepest JSON nesting.
    pub depth: usize,
    /// Longest `session` or `turn` id, in bytes.
    pub id_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body_bytes: 1 << 20,
            hook_body_bytes: 32 << 20,
            calls: 256,
            messages: 10_000,
            tools: 1024,
            depth: 64,
            id_bytes: 256,
        }
    }
}

impl Limits {
    /// Refuses bodies nested deeper than the cap, by a scan that never recurses.
    pub fn check_depth(&self, body: &[u8]) -> Result<(), ApiError> {
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        for (i, &b) in body.iter().enumerate() {
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => {
                    depth += 1;
                    if depth > self.depth {
                        return Err(ApiError::too_large(
                            format!("JSON is nested more than {} levels deep", self.depth),
                            Some(format!("byte {i}")),
                        ));
                    }
                }
                b'}' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        Ok(())
    }

    /// Refuses batches and conversations over the caps.
    pub fn check_request(&self, request: &Request) -> Result<(), ApiError> {
        self.check_counts(
            request.calls.len(),
            request.facts.messages.as_ref().map(Vec::len),
        )
    }

    /// Refuses a batch of `calls` calls, or a conversation of `messages` messages, over the
    /// caps: the one check both the one-pass and the strict path run.
    pub fn check_counts(&self, calls: usize, messages: Option<usize>) -> Result<(), ApiError> {
        if calls > self.calls {
            return Err(ApiError::too_large(
                format!("{calls} calls in one batch; the limit is {}", self.calls),
                Some("calls".into()),
            ));
        }
        self.check_message_count(messages)
    }

    /// Refuses offer requests over the caps (tool definitions, messages).
    pub fn check_offer(&self, request: &OfferRequest) -> Result<(), ApiError> {
        if request.tools.len() > self.tools {
            return Err(ApiError::too_large(
                format!(
                    "{} tool definitions; the limit is {}",
                    request.tools.len(),
                    self.tools
                ),
                Some("tools".into()),
            ));
        }
        self.check_messages(&request.facts)
    }

    /// Refuses an empty `session` or `turn` id (400), or one over the length cap (413).
    pub fn check_id(&self, field: &str, id: &str) -> Result<(), ApiError> {
        if id.is_empty() {
            return Err(ApiError::bad_request(
                "schema",
                format!("`{field}` is empty"),
                Some(field.into()),
            ));
        }
        if id.len() > self.id_bytes {
            return Err(ApiError::too_large(
                format!(
                    "`{field}` is {} bytes; the limit is {}",
                    id.len(),
                    self.id_bytes
                ),
                Some(field.into()),
            ));
        }
        Ok(())
    }

    fn check_messages(&self, facts: &toolgate_engine::Facts) -> Result<(), ApiError> {
        self.check_message_count(facts.messages.as_ref().map(Vec::len))
    }

    fn check_message_count(&self, messages: Option<usize>) -> Result<(), ApiError> {
        match messages {
            Some(n) if n > self.messages => Err(ApiError::too_large(
                format!("{n} messages; the limit is {}", self.messages),
                Some("facts.messages".into()),
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_scan_ignores_brackets_in_strings() {
        let l = Limits {
            depth: 2,
            ..Limits::default()
        };
        assert!(l.check_depth(br#"{"a": "[[[[{{{{\"]]"}"#).is_ok());
        assert!(l.check_depth(br#"{"a": [1, [2]]}"#).is_err());
        assert!(l.check_depth(br#"{"a": [1, 2]}"#).is_ok());
    }
}
