//! After a batch is judged: the turn's outputs kept and awaited, the shadow set chosen, and
//! a store's refusal turned into an error.

use super::Decider;
use crate::api_error::ApiError;
use crate::turn_state::Judged as TurnJudged;
use serde_json::Value;
use std::time::Instant;
use toolgate_engine::{Policy, Response as Decided};
use toolgate_turns::Origin;

impl Decider {
    /// After a batch of a session's turn: keeps the outputs the request brought (they settle
    /// the calls awaiting them), then awaits the untrusted outputs of the calls it allowed.
    pub(super) fn keep_outputs<'c>(
        &self,
        policy: &Policy,
        (session, turn): (&str, &str),
        brought: Option<&Value>,
        response: &Decided,
        now: Instant,
        call: impl Fn(usize) -> Option<(&'c str, &'c str, &'c Value)>,
    ) {
        if let Some(Value::Array(items)) = brought {
            self.turns.record_outputs(policy, session, turn, items, now);
        }
        let allowed = response
            .decisions
            .iter()
            .enumerate()
            .filter(|(_, d)| d.allow)
            .filter_map(|(i, _)| call(i));
        self.turns
            .expect_outputs(policy, session, turn, allowed, now);
    }

    /// The shadow set to compare a batch with, if any: none for a batch judged while the
    /// shared turn-state store was unavailable, whose answer is the server's fail-closed
    /// one (every latch assumed, `state` denials), not a reading of the policy.
    pub(super) fn shadowing(&self, origin: Option<Origin>) -> Option<&crate::shadow::Shadow> {
        self.shadow
            .as_ref()
            .filter(|_| origin != Some(Origin::Unavailable))
    }

    /// A batch judged against the turn-state store: the response and where its state came
    /// from, or 503 when the store refused the session.
    pub(super) fn with_state(
        &self,
        judged: TurnJudged,
    ) -> Result<(Decided, Option<Origin>), ApiError> {
        match judged {
            TurnJudged::Done(response, origin) => Ok((response, origin)),
            TurnJudged::Refused(e) => Err(self.session_refused(e)),
        }
    }
}
