//! The strict path: the request read into a JSON tree by the strict reader, which gives
//! every error with its place; taken when the one-pass reader cannot judge a request.

use super::{carried_approvals, carried_spent, schema_error, Caller, Decider, Judged};
use crate::api_error::ApiError;
use crate::approvals::batch::Keeper;
use crate::budgets::Scopes;
use crate::decisions::Record;
use serde_json::Value;
use std::time::Instant;
use toolgate_engine::Request;

impl Decider {
    /// Parses, routes and judges one request; records sessions, metrics and the log.
    pub(crate) async fn judge(
        &self,
        value: Value,
        module: Option<&str>,
        caller: &Caller,
    ) -> Result<Judged, ApiError> {
        let started = Instant::now();
        let mut request =
            Request::from_value(value).map_err(|e| self.client_error(schema_error(e)))?;
        caller
            .apply(&mut request.facts.principal)
            .map_err(|e| self.client_error(e))?;
        self.limits
            .check_request(&request)
            .map_err(|e| self.client_error(e))?;
        let set = self.policies.snapshot();
        if set.is_empty() {
            return Err(ApiError::unavailable("no policy is loaded"));
        }
        let policy = self.pick_policy(&set, module.or(request.policy.as_deref()))?;
        if module.is_some() && request.policy.as_deref().is_some_and(|p| Some(p) != module) {
            return Err(self.client_error(ApiError::bad_request(
                "schema",
                "`policy` in the input differs from the module in the URL",
                Some("policy".into()),
            )));
        }
        // Checked before any carried session state is merged in: the executor's own latch
        // names must be declared ones.
        policy
            .check_facts(&request.facts)
            .map_err(|e| self.client_error(schema_error(e)))?;
        if request
            .facts
            .approvals
            .as_ref()
            .is_some_and(|a| !a.is_empty())
        {
            return Err(self.client_error(carried_approvals()));
        }
        if request.facts.spent.is_some() {
            return Err(self.client_error(carried_spent()));
        }
        let ids = self.session_turn(&request.session, &request.turn)?;
        // The turn's tool outputs the server keeps, for provenance checks, unless the request
        // brings its own (then the executor's word, and kept for the turn's next batches).
        let brought = request.facts.outputs.is_some();
        if let (Some((s, t)), false) = (&ids, brought) {
            request.facts.outputs = self.turns.outputs_fact(policy, s, t, started);
        }
        let mut keeper = Keeper::new(self.ask, ids.as_ref().map(|(s, _)| s.as_str()), started);
        let scopes = Scopes::of(
            policy,
            request.session.as_deref(),
            request.turn.as_deref(),
            request.facts.principal.as_ref(),
        );
        let judged = self
            .turns
            .judge(
                policy,
                ids.as_ref().map(|(s, t)| (s.as_str(), t.as_str())),
                (scopes, &self.budgets),
                (&self.approvals, &mut keeper),
                started,
                |carried, counts, approvals| {
                    if let Some(c) = carried {
                        request.facts.latched = request.facts.latched.or(c);
                    }
                    if let Some(c) = counts {
                        request.facts.spent = Some(c.into_iter().collect());
                    }
                    request.facts.approvals = approvals.map(<[String]>::to_vec);
                    policy.decide(&request)
                },
            )
            .await;
        let (response, origin) = match self.with_state(judged) {
            Ok(done) => done,
            Err(e) => {
                self.approvals.finish(keeper.refused()).await;
                return Err(e);
            }
        };
        if let Some((s, t)) = &ids {
            let own = request.facts.outputs.as_ref().filter(|_| brought);
            self.keep_outputs(policy, (s, t), own, &response, started, |i| {
                request
                    .calls
                    .get(i)
                    .map(|c| (c.id.as_str(), c.tool.as_str(), &c.args))
            });
        }
        let headless = keeper.headless();
        let left = keeper.finish(policy, &response, request.turn.as_deref(), |i| {
            request.calls.get(i).map(|c| &c.args)
        });
        self.approvals.finish(left).await;
        // The request as the serving policy last judged it: its latch state carried in, the
        // book's approvals granted.
        let flips = self
            .shadowing(origin)
            .and_then(|shadow| shadow.compare(policy, &response, |p| Some(p.decide(&request))));
        let id = self.decisions.record(
            Record::new(started, &response)
                .origin(origin)
                .session(request.session.as_deref(), request.turn.as_deref())
                .request(Some(&request))
                .shadow(flips.as_ref())
                .headless(headless),
        );
        Ok((response, origin, id))
    }
}
