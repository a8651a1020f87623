//! `from` and `mentions` on an argument's value, against a request's [`Index`].
//!
//! A value is a tree; its *leaves* are its strings and numbers. Taint spreads upward, trust
//! does not:
//! - `from ingest`: some leaf is from ingest (an injected recipient among five is enough);
//! - `from prompt`: every leaf with a key occurs in the prompt;
//! - `mentions ingest` / `mentions prompt`: some token inside a string leaf does.
//!
//! Without the outputs (or, for `prompt`, the prompt) a test is unknown as *invalid*, never
//! as an absent fact: `on_missing allow` cannot open a tool because the executor sent no
//! outputs, since provenance fails closed whatever the rule says.
//!
//! A value with no leaf that has a key (an empty list, a number under six digits) is from
//! nowhere: `from` is false, `from prompt` included (a prompt's "June 13" vouches for no file
//! 13).

use super::{key, tokens, Index, Taint};
use crate::truth::{Truth, INVALID};
use serde_json::Value;
use std::borrow::Cow;

/// Each scalar leaf of an argument's value (nothing skipped: arguments have no metadata).
fn for_each_leaf<'v>(v: &'v Value, f: &mut dyn FnMut(&'v Value) -> bool) {
    super::for_each_leaf(v, &|_| false, f)
}

fn leaf_key(v: &Value) -> Option<Cow<'_, str>> {
    match v {
        Value::String(s) => key::of(s),
        Value::Number(n) => key::of_number(n).map(Cow::Owned),
        _ => None,
    }
}

/// Folds taints: any `From` or `OverCap` makes it true; else any `Absent` unknown.
#[derive(Default)]
struct Fold {
    hit: bool,
    absent: bool,
}

impl Fold {
    fn add(&mut self, t: Taint) -> bool {
        match t {
            Taint::From(_) | Taint::OverCap => self.hit = true,
            Taint::Absent => self.absent = true,
            Taint::Clean => {}
        }
        !self.hit
    }

    fn truth(self) -> Truth {
        if self.hit {
            Truth::True
        } else if self.absent {
            Truth::Unknown(INVALID)
        } else {
            Truth::False
        }
    }
}

/// `from ingest`.
pub(crate) fn from_ingest(v: &Value, index: &Index) -> Truth {
    let mut fold = Fold::default();
    for_each_leaf(v, &mut |leaf| match leaf_key(leaf) {
        Some(k) => fold.add(index.taint(&k)),
        None => true,
    });
    fold.truth()
}

/// `mentions ingest`.
pub(crate) fn mentions_ingest(v: &Value, index: &Index) -> Truth {
    let mut fold = Fold::default();
    for_each_leaf(v, &mut |leaf| {
        let Value::String(s) = leaf else { return true };
        tokens::find(s).all(|t| match key::of(t) {
            Some(k) => fold.add(index.taint(&k)),
            None => true,
        })
    });
    fold.truth()
}

/// Whether `args` carries a value from ingest, or a token from ingest inside one, for
/// `blocks tainted`: unknown (no outputs to tell) counts as carrying one.
pub(crate) fn tainted(args: &Value, index: &Index) -> bool {
    from_ingest(args, index) != Truth::False || mentions_ingest(args, index) != Truth::False
}

/// `from prompt`.
pub(crate) fn from_prompt(v: &Value, index: &Index) -> Truth {
    if !index.has_prompt() {
        return Truth::Unknown(INVALID);
    }
    let (mut keyed, mut all) = (false, true);
    for_each_leaf(v, &mut |leaf| {
        // A short number has no key, so it is from no prompt: "June 13" does not vouch
        // for file 13.
        let k = leaf_key(leaf);
        if let Some(k) = k {
            keyed = true;
            all = index.in_prompt(&k);
        }
        all
    });
    Truth::from_bool(keyed && all)
}

/// `mentions prompt`.
pub(crate) fn mentions_prompt(v: &Value, index: &Index) -> Truth {
    if !index.has_prompt() {
        return Truth::Unknown(INVALID);
    }
    let mut any = false;
    for_each_leaf(v, &mut |leaf| {
        if let Value::String(s) = leaf {
            any = tokens::find(s).any(|t| key::of(t).is_some_and(|k| index.in_prompt(&k)));
        }
        !any
    });
    Truth::from_bool(any)
}

/// What a denial names: the path inside the argument (`""` for the value itself, `[1]`,
/// `.to`) and what the index said of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    pub(crate) within: String,
    pub(crate) taint: Taint,
}

/// The first leaf of `v` that is from ingest (or, with `mentions`, holds a token that is),
/// with its path inside `v`. Allocates: it runs only to put a denial into words.
pub(crate) fn first_hit(v: &Value, index: &Index, mentions: bool) -> Option<Hit> {
    let mut taint = Taint::Clean;
    let hit = |t: &Taint| matches!(t, Taint::From(_) | Taint::OverCap);
    let within = super::find_leaf(v, String::new(), &|_| false, &mut |leaf| {
        let found = if mentions {
            match leaf {
                Value::String(s) => tokens::find(s)
                    .filter_map(key::of)
                    .map(|k| index.taint(&k))
                    .find(hit),
                _ => None,
            }
        } else {
            leaf_key(leaf).map(|k| index.taint(&k)).filter(hit)
        };
        match found {
            Some(t) => {
                taint = t;
                true
            }
            None => false,
        }
    })?;
    Some(Hit { within, taint })
}
