#![allow(clippy::unwrap_used)]
use super::*;
use toolgate_engine::{Call, Facts, Request};

const POLICY: &str = "module m\nwrite send\ningest fetch\nread look\nstage main { tools [fetch, look, send] }\nlatch untrusted { set_by [fetch] blocks [send] }\n";

fn policy() -> Policy {
    Policy::compile("m.gate", POLICY).unwrap()
}

/// Judges one call of `tool` under turn `id` the way every surface does: place, decide with
/// the placed latches, record the latches back. `Err` is a denial the surface gives.
fn call(
    s: &mut SessionTurns,
    p: &Policy,
    id: Option<&str>,
    new_ids: NewIds,
    tool: &str,
) -> Result<bool, TurnError> {
    let placed = s.place(p, id, new_ids)?;
    let facts = Facts {
        stage: Some("main".into()),
        latched: placed.latched.clone(),
        called: Some(s.called_facts()),
        ..Facts::default()
    };
    let r = p.decide(&Request::new(
        facts,
        vec![Call::new("c", tool, serde_json::json!({}))],
    ));
    s.latch(p, &placed, tool, &r.latched);
    Ok(r.decisions[0].allow)
}

#[test]
fn interleaved_turn_ids_on_one_connection_keep_each_turns_latch() {
    // Chat A fetches, chat B makes one call, then chat A's write: denied.
    let p = policy();
    let mut s = SessionTurns::default();
    assert_eq!(
        call(&mut s, &p, Some("a"), NewIds::StartTurn, "fetch"),
        Ok(true)
    );
    assert_eq!(
        call(&mut s, &p, Some("b"), NewIds::StartTurn, "look"),
        Ok(true)
    );
    assert_eq!(
        call(&mut s, &p, Some("a"), NewIds::StartTurn, "send"),
        Ok(false)
    );
    assert_eq!(
        call(&mut s, &p, Some("b"), NewIds::StartTurn, "send"),
        Ok(true)
    );
}

#[test]
fn on_hooks_an_unseen_id_never_starts_a_turn_without_a_signal() {
    let p = policy();
    let mut s = SessionTurns::default();
    s.signal(&p, Some("p1")).unwrap();
    assert_eq!(
        call(&mut s, &p, Some("p1"), NewIds::NeedSignal, "fetch"),
        Ok(true)
    );
    // An id merely different from the last: judged with every latch set.
    assert_eq!(
        call(&mut s, &p, Some("p0"), NewIds::NeedSignal, "send"),
        Ok(false)
    );
    assert_eq!(
        s.place(&p, Some("p0"), NewIds::NeedSignal)
            .unwrap()
            .placement,
        Placement::Unknown
    );
    // The next prompt starts a clear turn; a late call of the older one stays latched.
    s.signal(&p, Some("p2")).unwrap();
    assert_eq!(
        call(&mut s, &p, Some("p2"), NewIds::NeedSignal, "send"),
        Ok(true)
    );
    assert_eq!(
        call(&mut s, &p, Some("p1"), NewIds::NeedSignal, "send"),
        Ok(false)
    );
    assert_eq!(
        call(&mut s, &p, Some("p2"), NewIds::NeedSignal, "send"),
        Ok(true)
    );
}

#[test]
fn a_signal_without_an_id_is_named_by_the_first_unseen_id() {
    let p = policy();
    let mut s = SessionTurns::default();
    s.signal(&p, None).unwrap();
    assert_eq!(
        call(&mut s, &p, Some("g1"), NewIds::NeedSignal, "fetch"),
        Ok(true)
    );
    assert_eq!(
        call(&mut s, &p, Some("g1"), NewIds::NeedSignal, "send"),
        Ok(false)
    );
    s.signal(&p, None).unwrap();
    assert_eq!(
        call(&mut s, &p, Some("g2"), NewIds::NeedSignal, "send"),
        Ok(true)
    );
    assert_eq!(
        call(&mut s, &p, Some("g1"), NewIds::NeedSignal, "send"),
        Ok(false)
    );
    // No ids at all (Gemini CLI): the current turn.
    assert_eq!(
        call(&mut s, &p, None, NewIds::NeedSignal, "fetch"),
        Ok(true)
    );
    assert_eq!(
        call(&mut s, &p, None, NewIds::NeedSignal, "send"),
        Ok(false)
    );
}

#[test]
fn a_late_signal_of_a_known_turn_does_not_reset_the_current_one() {
    let p = policy();
    let mut s = SessionTurns::default();
    s.signal(&p, Some("p1")).unwrap();
    s.signal(&p, Some("p2")).unwrap();
    assert_eq!(
        call(&mut s, &p, Some("p2"), NewIds::NeedSignal, "fetch"),
        Ok(true)
    );
    s.signal(&p, Some("p1")).unwrap();
    s.signal(&p, Some("p2")).unwrap();
    assert_eq!(
        call(&mut s, &p, Some("p2"), NewIds::NeedSignal, "send"),
        Ok(false)
    );
    assert_eq!(s.turns(), 2);
}

#[test]
fn recovered_state_stays_latched_until_the_next_signal_whatever_ids_arrive() {
    let p = policy();
    let mut s = SessionTurns::recovered();
    for (id, mode) in [
        (Some("new-id"), NewIds::NeedSignal),
        (Some("other"), NewIds::StartTurn),
        (None, NewIds::NeedSignal),
    ] {
        assert_eq!(call(&mut s, &p, id, mode, "send"), Ok(false), "{id:?}");
        assert_eq!(call(&mut s, &p, id, mode, "look"), Ok(true), "{id:?}");
    }
    s.signal(&p, Some("p9")).unwrap();
    assert!(!s.is_recovered());
    assert_eq!(
        call(&mut s, &p, Some("p9"), NewIds::NeedSignal, "send"),
        Ok(true)
    );
}

#[test]
fn a_latch_the_judging_policy_no_longer_declares_denies_the_turn() {
    let p = policy();
    // The file caught half-way through a rewrite: the latch declaration cut off.
    let cut = Policy::compile("m.gate", &POLICY[..POLICY.find("latch").unwrap()]).unwrap();
    assert_eq!(cut.latches().count(), 0);
    let mut s = SessionTurns::default();
    s.signal(&p, Some("t")).unwrap();
    call(&mut s, &p, Some("t"), NewIds::NeedSignal, "fetch").unwrap();
    let err = call(&mut s, &cut, Some("t"), NewIds::NeedSignal, "send").unwrap_err();
    assert!(matches!(&err, TurnError::PolicyChanged { latch, .. } if latch == "untrusted"));
    // Under the full policy again, latched as before.
    assert_eq!(
        call(&mut s, &p, Some("t"), NewIds::NeedSignal, "send"),
        Ok(false)
    );
    // An unlatched turn is judged by whatever policy there is; the next signal starts over.
    s.signal(&cut, Some("u")).unwrap();
    assert_eq!(
        call(&mut s, &cut, Some("u"), NewIds::NeedSignal, "send"),
        Ok(true)
    );
}

#[test]
fn a_latched_turn_pushed_out_leaves_a_fingerprint() {
    let p = policy();
    let mut s = SessionTurns::default();
    s.signal(&p, Some("old")).unwrap();
    call(&mut s, &p, Some("old"), NewIds::NeedSignal, "fetch").unwrap();
    for i in 0..KEPT_TURNS * 2 {
        s.signal(&p, Some(&format!("t{i}"))).unwrap();
    }
    let placed = s.place(&p, Some("old"), NewIds::NeedSignal).unwrap();
    assert_eq!(placed.placement, Placement::Forgotten);
    assert_eq!(
        call(&mut s, &p, Some("old"), NewIds::StartTurn, "send"),
        Ok(false)
    );
    // A repeated signal of it starts nothing either.
    let turns = s.turns();
    s.signal(&p, Some("old")).unwrap();
    assert_eq!(s.turns(), turns);
}

#[test]
fn late_post_events_are_dated_by_their_own_turn_or_not_at_all() {
    let p = policy();
    let mut s = SessionTurns::default();
    s.record_call("look", true, None);
    s.signal(&p, Some("p1")).unwrap();
    s.signal(&p, Some("p2")).unwrap();
    s.record_call("look", true, Some("p1"));
    s.record_call("look", true, Some("never-seen"));
    s.record_call("look", true, Some("p2"));
    let ages: Vec<_> = s.called_facts().iter().map(|c| c.turns_ago).collect();
    assert_eq!(ages, [None, Some(1), None, Some(0)]);
}

#[test]
fn state_round_trips_and_inconsistent_state_is_refused() {
    let p = policy();
    let mut s = SessionTurns::default();
    s.signal(&p, Some("p1")).unwrap();
    call(&mut s, &p, Some("p1"), NewIds::NeedSignal, "fetch").unwrap();
    s.record_call("look", true, Some("p1"));
    let text = serde_json::to_string(&s).unwrap();
    let back: SessionTurns = serde_json::from_str(&text).unwrap();
    assert_eq!(back, s);
    assert!(back.is_consistent());
    let mut bad = s.clone();
    bad.called.push(Called {
        tool: "look".into(),
        ok: true,
        turn: Some(7),
    });
    assert!(!bad.is_consistent());
    let mut bad = s.clone();
    bad.recent.clear();
    assert!(!bad.is_consistent());
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[derive(Debug, Clone)]
    enum Op {
        /// The user's next prompt; `true` when the signal carries the turn's id.
        Signal(bool),
        /// A late or repeated signal of the turn `k` prompts back.
        LateSignal(usize),
        /// A call of a tool under the turn `k` prompts back (or under no id).
        Call(usize, Option<usize>),
        /// A post-tool event under the turn `k` prompts back.
        Post(usize),
        /// The state is lost and read back as unreadable.
        Lose,
        /// A save and load.
        RoundTrip,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => any::<bool>().prop_map(Op::Signal),
            1 => (0..20usize).prop_map(Op::LateSignal),
            6 => (0..3usize, proptest::option::of(0..20usize)).prop_map(|(t, k)| Op::Call(t, k)),
            1 => (0..20usize).prop_map(Op::Post),
            1 => Just(Op::Lose),
            1 => Just(Op::RoundTrip),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Whatever the interleaving of signals, ids, late events and lost state: a write is
        /// never allowed in a turn that read untrusted content. (Lost state protects the
        /// turns before the loss until the next signal, as the contract says.)
        #[test]
        fn no_write_runs_in_a_turn_that_fetched(
            ops in proptest::collection::vec(op(), 1..150),
            start in any::<bool>(),
            ids_in_calls in any::<bool>(),
        ) {
            // An agent sends turn ids with every call or with none (Gemini CLI); one without
            // them cannot tell a late call from a current one, so its calls are the
            // current turn's.
            let p = policy();
            let tools = ["fetch", "look", "send"];
            let new_ids = if start { NewIds::StartTurn } else { NewIds::NeedSignal };
            let mut s = SessionTurns::default();
            // Prompt index -> its id; the truth: turns that fetched.
            let mut prompts: Vec<String> = vec!["p0".into()];
            let mut signalled = vec![false];
            let mut fetched: HashSet<usize> = HashSet::new();
            let mut lost_before: Option<usize> = None;
            let back = |prompts: &Vec<String>, k: usize| prompts.len().saturating_sub(1 + k);
            for op in ops {
                match op {
                    Op::Signal(carries) => {
                        let id = format!("p{}", prompts.len());
                        let carries = carries && ids_in_calls;
                        if s.signal(&p, carries.then_some(id.as_str())).is_ok() {
                            prompts.push(id);
                            signalled.push(carries);
                            if let Some(n) = lost_before.take() {
                                fetched.retain(|t| *t >= n);
                            }
                        }
                    }
                    Op::LateSignal(k) => {
                        // Only a signal that carried its id can be repeated (turn 0 had none).
                        let i = back(&prompts, k);
                        if signalled[i] && s.signal(&p, Some(&prompts[i])).is_ok() {
                            // After a loss even a repeated signal is the next signal.
                            if let Some(n) = lost_before.take() {
                                fetched.retain(|t| *t >= n);
                            }
                        }
                    }
                    Op::Call(t, k) => {
                        let (id, turn) = match k {
                            Some(k) if ids_in_calls => {
                                let i = back(&prompts, k);
                                (Some(prompts[i].as_str()), i)
                            }
                            Some(_) | None if ids_in_calls => {
                                let i = prompts.len() - 1;
                                (Some(prompts[i].as_str()), i)
                            }
                            _ => (None, prompts.len() - 1),
                        };
                        let Ok(allowed) = call(&mut s, &p, id, new_ids, tools[t]) else { continue };
                        if tools[t] == "send" && allowed {
                            prop_assert!(!fetched.contains(&turn), "a write ran in turn {turn}, which fetched");
                        }
                        if tools[t] == "fetch" && allowed { fetched.insert(turn); }
                    }
                    Op::Post(k) => {
                        let i = back(&prompts, k);
                        s.record_call("look", true, ids_in_calls.then_some(prompts[i].as_str()));
                    }
                    Op::Lose => {
                        s = SessionTurns::recovered();
                        lost_before = Some(prompts.len());
                    }
                    Op::RoundTrip => {
                        let text = serde_json::to_string(&s).unwrap();
                        let back: SessionTurns = serde_json::from_str(&text).unwrap();
                        prop_assert!(back.is_consistent());
                        s = back;
                    }
                }
            }
        }
    }
}
