//! The one serialized form of [`SessionTurns`], shared by every backend that keeps it outside
//! the process: the hooks' state files (`file.rs`) and the server's shared store for
//! `/v1/hooks` (`serve --state redis://...`).
//!
//! Reading is strict and fails closed: text over [`MAX_STATE_BYTES`], a key given twice, an
//! unknown key, another [`VERSION`] or state that breaks the model's invariants is
//! unreadable, and unreadable state is [`SessionTurns::recovered`] (every latch set until the
//! user's next explicit turn signal).

use crate::session::SessionTurns;
use serde::{Deserialize, Serialize};

/// The state format this build reads and writes. State of any other version is unreadable.
pub const VERSION: u64 = 2;
/// The longest serialized state read; longer state is unreadable.
pub const MAX_STATE_BYTES: u64 = 1 << 20;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored<S> {
    version: u64,
    state: S,
}

/// The serialized form of `state`, as JSON.
pub fn encode(state: &SessionTurns) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&Stored {
        version: VERSION,
        state,
    })
}

/// The state `text` holds, or `None` when it is unreadable (the caller then takes
/// [`SessionTurns::recovered`]).
pub fn decode(text: &str) -> Option<SessionTurns> {
    if text.len() as u64 > MAX_STATE_BYTES {
        return None;
    }
    let value = toolgate_engine::parse_json(text).ok()?;
    let stored: Stored<SessionTurns> = serde_json::from_value(value).ok()?;
    (stored.version == VERSION && stored.state.is_consistent()).then_some(stored.state)
}

/// The state `text` holds, or the fail-closed state when it is unreadable.
pub fn decode_or_recovered(text: &str) -> SessionTurns {
    decode(text).unwrap_or_else(SessionTurns::recovered)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn state_round_trips_and_anything_else_is_recovered() {
        let p =
            toolgate_engine::Policy::compile("m.gate", "module m\nread r\nstage s { tools [r] }\n")
                .unwrap();
        let mut s = SessionTurns::default();
        s.signal(&p, Some("p1")).unwrap();
        s.record_call("r", true, Some("p1"));
        let text = String::from_utf8(encode(&s).unwrap()).unwrap();
        assert_eq!(decode(&text), Some(s));
        let long = " ".repeat(MAX_STATE_BYTES as usize + 1);
        for bad in [
            "",
            "{",
            "[]",
            &text[..text.len() / 2],
            &text.replace("\"version\":2", "\"version\":1"),
            &text.replace("\"version\":2", "\"version\":2,\"version\":2"),
            &text.replace("\"version\":2", "\"version\":2,\"extra\":1"),
            &long,
        ] {
            assert_eq!(decode(bad), None, "{bad:.80}");
            assert!(decode_or_recovered(bad).is_recovered());
        }
    }
}
