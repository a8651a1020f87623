//! The one-pass path: a request routed, read and judged in one pass over its text with the
//! engine's one-pass reader ([`toolgate_engine::Policy::read_json`]).

use super::{Caller, Decider, Judged};
use crate::api_error::ApiError;
use crate::approvals::batch::Keeper;
use crate::budgets::Scopes;
use crate::decisions::Record;
use crate::shadow::Seen;
use serde::Deserialize;
use std::borrow::Cow;
use std::time::Instant;

impl Decider {
    /// Routes, reads and judges one request in one pass over `text` with the engine's
    /// one-pass reader ([`Policy::read_json`]); records sessions, metrics and the log.
    ///
    /// `None`, before anything is recorded, when this path cannot judge the request: it is
    /// invalid, over a cap, names no loaded policy, or `--log-args` wants the whole request.
    /// The caller then takes the strict path ([`Decider::judge`]), which gives the exact
    /// error (or, for the rare valid request only the one-pass reader refuses, the decision).
    /// So every error a client sees comes from one place, in one order.
    pub(crate) async fn judge_fast(
        &self,
        text: &str,
        module: Option<&str>,
        caller: &Caller,
    ) -> Option<Result<Judged, ApiError>> {
        let started = Instant::now();
        if self.decisions.log().needs_request() {
            return None;
        }
        let set = self.policies.snapshot();
        let policy = match (module, set.only()) {
            (Some(m), _) => set.get(m)?,
            (None, Some(only)) => only,
            (None, None) => {
                let route = serde_json::from_str::<Route<'_>>(text).ok()?;
                match route.policy {
                    Some(m) => set.get(&m)?,
                    None => self.unnamed_policy(&set)?,
                }
            }
        };
        // Checks the module the request names and its own latch names, before any session
        // state is carried in. A request carrying approvals is refused on the strict path.
        let mut request = policy.read_json(text)?;
        if request.has_approvals() || request.has_spent() {
            return None;
        }
        if let Caller::Verified(principal) = caller {
            // The strict path gives the error for a principal the request brought itself.
            if request.has_principal() {
                return None;
            }
            request.set_principal(principal.clone());
        }
        self.limits
            .check_counts(request.calls(), request.messages())
            .ok()?;
        let ids = match (request.session(), request.turn()) {
            (Some(s), Some(t)) => {
                self.limits.check_id("session", s).ok()?;
                self.limits.check_id("turn", t).ok()?;
                true
            }
            (None, None) => false,
            _ => return None,
        };
        // From here on the request is judged: nothing below falls back.
        let session = match (ids, request.session(), request.turn()) {
            (true, Some(s), Some(t)) => Some((s.to_owned(), t.to_owned())),
            _ => None,
        };
        let mut keeper = Keeper::new(self.ask, session.as_ref().map(|(s, _)| s.as_str()), started);
        // What is carried into the request besides its text, kept only for the shadow set.
        let mut seen = Seen::new(self.shadow.is_some());
        let brought = request.has_outputs();
        if let (Some((s, t)), false) = (&session, brought) {
            if let Some(outputs) = self.turns.outputs_fact(policy, s, t, started) {
                seen.outputs(&outputs);
                request.set_outputs(outputs);
            }
        }
        let scopes = Scopes::of(
            policy,
            request.session(),
            request.turn(),
            request.principal(),
        );
        let judged = self
            .turns
            .judge(
                policy,
                session.as_ref().map(|(s, t)| (s.as_str(), t.as_str())),
                (scopes, &self.budgets),
                (&self.approvals, &mut keeper),
                started,
                |carried, counts, approvals| {
                    if let Some(c) = carried {
                        request.carry(c);
                        seen.carried(c);
                    }
                    if let Some(c) = counts {
                        seen.spent(&c);
                        request.set_spent(c);
                    }
                    request.grant(approvals.unwrap_or_default());
                    seen.granted(approvals.unwrap_or_default());
                    policy.decide_read(&request)
                },
            )
            .await;
        let (response, origin) = match self.with_state(judged) {
            Ok(done) => done,
            Err(e) => {
                self.approvals.finish(keeper.refused()).await;
                return Some(Err(e));
            }
        };
        let (s, t) = session
            .as_ref()
            .map(|(s, t)| (s.as_str(), t.as_str()))
            .unzip();
        if let (Some(s), Some(t)) = (s, t) {
            let own = request.outputs().filter(|_| brought);
            self.keep_outputs(policy, (s, t), own, &response, started, |i| request.call(i));
        }
        let headless = keeper.headless();
        let left = keeper.finish(policy, &response, t, |i| request.call_args(i));
        self.approvals.finish(left).await;
        let flips = self
            .shadowing(origin)
            .and_then(|shadow| shadow.compare(policy, &response, |p| seen.judge(p, text)));
        let id = self.decisions.record(
            Record::new(started, &response)
                .origin(origin)
                .session(s, t)
                .shadow(flips.as_ref())
                .headless(headless),
        );
        Some(Ok((response, origin, id)))
    }
}

/// The top-level `policy` field, read to pick among several loaded policies before the
/// chosen one reads the whole body. Other fields are skipped unread; the chosen policy's
/// reader then refuses duplicate keys (a second `policy` already fails here).
#[derive(Deserialize)]
struct Route<'a> {
    #[serde(borrow, default)]
    policy: Option<Cow<'a, str>>,
}
