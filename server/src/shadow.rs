//! Shadow mode (`toolgate serve DIR --shadow DIR2`, issue 26): a second policy set, judged
//! beside the serving one on every `/v1/decide` and `/v1/data/{module}/decide` batch, that
//! never answers. The answer comes from the serving set, always; what the shadow would have
//! decided differently is counted (`toolgate_shadow_flips_total{policy,rule,from,to}`) and
//! written into the batch's decision-log line, so a stricter policy can be tried on live
//! traffic before it serves.
//!
//! What the shadow judges is the batch as the serving policy saw it: the same calls and facts,
//! the same latch state carried from the turn, the same approvals taken from the book. It has
//! no side effects: it writes no turn state, spends or records no approval, and the client's
//! answer is the same bytes with and without it. Its set lives in its own [`PolicyStore`],
//! loaded by [`Shadow::install`] (the only place it is swapped) from the same triggers as the
//! serving set, without the reload gate, which guards what answers.
//!
//! A leaf component: it reads the loader, the metrics' label escaping and the clock, and
//! nothing of the server's state, which holds it.

use crate::loader::{
    describe, load_complete, off_thread, say_failed, LoadError, LoadReport, Loads,
};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use toolgate_engine::{Decision, DenyKind, Latched, Policy, PolicyStore, Request, Response};

/// The shadow set, how its loads went, and what it found.
pub struct Shadow {
    /// The directory (or one policy file) the shadow set is loaded from.
    path: PathBuf,
    /// The shadow set; empty until the first load.
    store: PolicyStore,
    /// The shadow set's generation; serialises its loads.
    generation: tokio::sync::Mutex<u64>,
    /// The last load that swapped a shadow set in, and the last attempt.
    loads: Loads,
    /// Flips by (policy, rule, from, to).
    flips: Mutex<BTreeMap<FlipKey, u64>>,
    /// Batches whose policy the shadow set has no module of, by policy.
    missing: Mutex<BTreeMap<Arc<str>, u64>>,
    /// Batches judged by both sets.
    compared: AtomicU64,
    /// Shadow loads that swapped a set in.
    reloads_ok: AtomicU64,
    /// Shadow loads that failed (the previous shadow set stays).
    reloads_failed: AtomicU64,
}

/// A flip series' labels: policy, rule, from, to.
type FlipKey = (Arc<str>, Arc<str>, &'static str, &'static str);

/// What the shadow set decided differently in one batch: for each call (in request order)
/// the shadow's decision where it flipped, `None` where it did not. Only made when at least
/// one call flipped.
#[derive(Debug)]
pub struct Flips {
    /// The revision of the shadow policy that judged the batch.
    pub revision: Arc<str>,
    /// Per call, the shadow's decision where it flipped.
    pub calls: Vec<Option<Decision>>,
}

/// A flipped call in a decision-log line: what the shadow decided.
#[derive(Serialize)]
pub(crate) struct ShadowLine<'a> {
    decision: &'static str,
    kind: Option<DenyKind>,
    refusal: Option<&'a str>,
    revision: &'a str,
    rule: Option<&'a str>,
}

impl Flips {
    /// The log line's `shadow` object of call `index`, where it flipped.
    pub(crate) fn line(&self, index: usize) -> Option<ShadowLine<'_>> {
        let d = self.calls.get(index)?.as_ref()?;
        Some(ShadowLine {
            decision: word(d),
            kind: d.kind,
            refusal: d.reason.as_deref(),
            revision: &self.revision,
            rule: d.rule.as_deref(),
        })
    }
}

/// A decision as one word: `allow`, `ask` or `deny`, the directions of a flip.
pub fn word(d: &Decision) -> &'static str {
    if d.allow {
        "allow"
    } else if d.kind == Some(DenyKind::Ask) {
        "ask"
    } else {
        "deny"
    }
}

/// Whether the shadow's decision `shadow` flips the serving set's `live` one, and if so
/// under which rule label. Not a flip: the same word (two denials by different rules are
/// both `deny`); a call the serving set denied as `state` (the server's own fail-closed
/// denial, which says nothing of the policy); a call the serving set allowed with an
/// approval (a person's, or `--ask allow-logged`) that the shadow asks for, since an approval
/// names the serving revision and no other policy could accept it.
///
/// The label is the rule that made the difference: the shadow's when it denies or asks, the
/// serving set's when only the shadow allows; for a stage, latch or unclassified denial, its
/// stage or latch name, or the kind's word when the decision names none.
pub fn flip<'d>(live: &'d Decision, shadow: &'d Decision) -> Option<&'d str> {
    let (from, to) = (word(live), word(shadow));
    if from == to
        || live.kind == Some(DenyKind::State)
        || (live.allow && live.approval.is_some() && to == "ask")
    {
        return None;
    }
    let by = if shadow.allow { live } else { shadow };
    Some(
        by.rule
            .as_deref()
            .or(by.kind.map(DenyKind::as_str))
            .unwrap_or("unclassified"),
    )
}

/// `rule` (the element `d` names, from [`flip`]) as a metric label: as it is, but for a
/// stage denial naming a stage `policy` does not declare, which is the request's own `stage`
/// fact (an unknown stage): a label per string a client sends would grow the series without
/// bound, so it is `stage`. Every other name is one the policy declares, or a fixed word.
fn label_of<'a>(rule: &'a str, d: &Decision, policy: &Policy) -> &'a str {
    if d.kind == Some(DenyKind::Stage) && !policy.stages().any(|s| s == rule) {
        "stage"
    } else {
        rule
    }
}

/// What a batch on the one-pass path carried into the serving policy's request besides its
/// own text: the turn's latch state and the approvals taken from the book. Kept only with
/// `--shadow` ([`Seen::new`]`(false)` keeps nothing), so the shadow can judge the same
/// request from the same text.
#[derive(Debug, Default)]
pub struct Seen {
    on: bool,
    carried: Option<Latched>,
    approvals: Option<Vec<String>>,
    spent: Option<Vec<(String, f64)>>,
    outputs: Option<serde_json::Value>,
}

impl Seen {
    /// Keeps what is carried when `on` (a shadow set is configured), else nothing.
    pub fn new(on: bool) -> Seen {
        Seen {
            on,
            ..Seen::default()
        }
    }

    /// The turn's latch state was carried into the request.
    pub fn carried(&mut self, latched: &Latched) {
        if self.on {
            self.carried = Some(latched.clone());
        }
    }

    /// The budget counts were given to the request (`facts.spent`): the shadow's budgets of
    /// the same names are judged from them, as the strict path's shadow judges the request
    /// with its counts, rather than denied for a count they lack.
    pub fn spent(&mut self, counts: &[(String, f64)]) {
        if self.on {
            self.spent = Some(counts.to_vec());
        }
    }

    /// The turn's outputs the server keeps were given to the request (`facts.outputs`).
    pub fn outputs(&mut self, outputs: &serde_json::Value) {
        if self.on {
            self.outputs = Some(outputs.clone());
        }
    }

    /// The request was last judged with these approvals (none: empty).
    pub fn granted(&mut self, approvals: &[String]) {
        if self.on {
            self.approvals = Some(approvals.to_vec());
        }
    }

    /// Judges `text` with `policy` (a shadow policy) as the serving policy judged it: read
    /// by the shadow's own one-pass reader (which keeps the custom facts *it* reads; the
    /// serving policy's reader skipped those it does not), with the same latch state and
    /// approvals. A request the shadow's reader refuses (its own `latched` names a latch the
    /// shadow does not declare) is read by the strict reader; such a name sets every shadow
    /// latch, the engine's rule for a name it does not know. `None` if even that fails.
    pub fn judge(&self, policy: &Policy, text: &str) -> Option<Response> {
        if let Some(mut request) = policy.read_json(text) {
            if let Some(c) = &self.carried {
                request.carry(c);
            }
            if let Some(a) = &self.approvals {
                request.grant(a);
            }
            if let Some(c) = &self.spent {
                request.set_spent(c.clone());
            }
            if let Some(o) = &self.outputs {
                request.set_outputs(o.clone());
            }
            return Some(policy.decide_read(&request));
        }
        let mut request = Request::from_json(text).ok()?;
        if let Some(c) = &self.carried {
            request.facts.latched = request.facts.latched.or(c);
        }
        if let Some(a) = &self.approvals {
            request.facts.approvals = Some(a.clone());
        }
        if let Some(c) = &self.spent {
            request.facts.spent = Some(c.iter().cloned().collect());
        }
        if let Some(o) = &self.outputs {
            request.facts.outputs = Some(o.clone());
        }
        Some(policy.decide(&request))
    }
}

impl Shadow {
    /// A shadow set to be loaded from `path` (a directory, or one policy file); nothing is
    /// loaded until [`Shadow::install`].
    pub fn new(path: PathBuf) -> Shadow {
        Shadow {
            path,
            store: PolicyStore::default(),
            generation: tokio::sync::Mutex::new(0),
            loads: Loads::default(),
            flips: Mutex::default(),
            missing: Mutex::default(),
            compared: AtomicU64::new(0),
            reloads_ok: AtomicU64::new(0),
            reloads_failed: AtomicU64::new(0),
        }
    }

    /// Where the shadow set is loaded from.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The one place a shadow set is swapped in: loads the path with the serving set's
    /// loader (every file compiles, the directory did not change while it was read, and,
    /// with `deny_warnings`, nothing warns), off the async threads, and swaps it in. A set
    /// that fails leaves the previous shadow set judging, and is reported on stderr, in
    /// `/health` and in `/metrics`. No reload gate: the shadow set never answers.
    pub async fn install(&self, trigger: &str, deny_warnings: bool) -> Result<u64, LoadError> {
        let mut generation = self.generation.lock().await;
        let next = *generation + 1;
        let path = self.path.clone();
        match off_thread(move || load_complete(&path, next, deny_warnings)).await {
            Ok(set) => {
                let loaded = describe(&set);
                self.store.swap(set);
                *generation = next;
                self.reloads_ok.fetch_add(1, Relaxed);
                self.loads.applied(LoadReport::now(true, trigger, None));
                eprintln!("toolgate: shadow: loaded generation {next} ({trigger}): {loaded}");
                Ok(next)
            }
            Err(e) => {
                let diagnostics = e.to_string();
                self.reloads_failed.fetch_add(1, Relaxed);
                say_failed(
                    "shadow reload",
                    trigger,
                    *generation,
                    &self.store.snapshot(),
                    &diagnostics,
                );
                self.loads
                    .attempted(LoadReport::now(false, trigger, Some(diagnostics)));
                Err(e)
            }
        }
    }

    /// Judges the batch the serving set answered with `live` by the shadow policy of the
    /// same module (`judge` runs it; `None` from it compares nothing), counts what flipped,
    /// and returns the flips when any call flipped. A batch whose module the shadow set
    /// lacks is counted under `toolgate_shadow_missing_total` and compared with nothing.
    ///
    /// `serving` is the policy that answered: a flip's `rule` label must be a name the policy
    /// whose decision made the difference declares, or a fixed word ([`label_of`]).
    pub fn compare(
        &self,
        serving: &Policy,
        live: &Response,
        judge: impl FnOnce(&Policy) -> Option<Response>,
    ) -> Option<Flips> {
        let set = self.store.snapshot();
        let Some(policy) = set.get(&live.policy) else {
            if let Ok(mut missing) = self.missing.lock() {
                *missing.entry(live.policy.clone()).or_default() += 1;
            }
            return None;
        };
        let shadow = judge(policy)?;
        self.compared.fetch_add(1, Relaxed);
        let mut any = false;
        let calls: Vec<Option<Decision>> = live
            .decisions
            .iter()
            .zip(shadow.decisions)
            .map(|(l, s)| {
                let rule = flip(l, &s)?;
                let rule = match s.allow {
                    true => label_of(rule, l, serving),
                    false => label_of(rule, &s, policy),
                };
                if let Ok(mut flips) = self.flips.lock() {
                    let key = (live.policy.clone(), Arc::from(rule), word(l), word(&s));
                    *flips.entry(key).or_default() += 1;
                }
                any = true;
                Some(s)
            })
            .collect();
        any.then_some(Flips {
            revision: shadow.revision,
            calls,
        })
    }

    /// The `shadow` object of `/health` and `GET /v1/policies`: the path, the modules
    /// loaded with their revisions, the generation, the last load, and the last attempt's
    /// error while it failed (the previous shadow set still judges).
    pub fn status(&self) -> Value {
        let set = self.store.snapshot();
        let loaded: Vec<Value> = set
            .iter()
            .map(|p| json!({"module": p.module(), "revision": p.revision()}))
            .collect();
        let last = self.loads.last_attempt();
        let error = last
            .as_ref()
            .filter(|r| !r.ok)
            .and_then(|r| r.error.clone());
        json!({
            "path": self.path.display().to_string(),
            "ok": error.is_none() && !set.is_empty(),
            "loaded": loaded,
            "generation": set.generation(),
            "last_load": self.loads.last_ok(),
            "last_error": error,
        })
    }

    /// The shadow's series in Prometheus text: flips by policy, rule and direction, batches
    /// compared, batches whose module the shadow lacks, its loads, and its modules.
    pub fn render_metrics(&self, out: &mut String) {
        use crate::metrics::{label, unlabelled};
        let _ = writeln!(
            out,
            "# HELP toolgate_shadow_flips_total Calls the shadow set (--shadow) decided otherwise than the serving set, by policy, the rule that made the difference, and direction.\n# TYPE toolgate_shadow_flips_total counter"
        );
        if let Ok(flips) = self.flips.lock() {
            for ((policy, rule, from, to), n) in flips.iter() {
                let _ = writeln!(
                    out,
                    "toolgate_shadow_flips_total{{policy=\"{}\",rule=\"{}\",from=\"{from}\",to=\"{to}\"}} {n}",
                    label(policy),
                    label(rule)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP toolgate_shadow_missing_total Batches whose policy the shadow set has no module of (nothing compared).\n# TYPE toolgate_shadow_missing_total counter"
        );
        if let Ok(missing) = self.missing.lock() {
            for (policy, n) in missing.iter() {
                let _ = writeln!(
                    out,
                    "toolgate_shadow_missing_total{{policy=\"{}\"}} {n}",
                    label(policy)
                );
            }
        }
        for (name, help, v) in [
            (
                "toolgate_shadow_batches_total",
                "Batches judged by the serving and the shadow set.",
                &self.compared,
            ),
            (
                "toolgate_shadow_reloads_ok_total",
                "Shadow loads that swapped a shadow set in.",
                &self.reloads_ok,
            ),
            (
                "toolgate_shadow_reloads_failed_total",
                "Shadow loads that failed; the previous shadow set still judges.",
                &self.reloads_failed,
            ),
        ] {
            unlabelled(out, "counter", name, help, v.load(Relaxed));
        }
        unlabelled(
            out,
            "gauge",
            "toolgate_shadow_policies_loaded",
            "Policies in the shadow set.",
            self.store.snapshot().len(),
        );
    }
}
