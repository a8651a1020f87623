//! Read-only views of a request, shared by the owned [`Request`] and the borrowed JSON path.
//!
//! The evaluator reads facts only through these views, so one evaluator serves both the
//! typed request a Rust embedder builds and the zero-copy request read from JSON bytes
//! (`fast_json`). Each view is a two-armed enum: a branch per access, no allocation, no
//! dynamic dispatch.

use crate::truth::{Truth, INVALID};
use crate::wire::request::{Call, CalledTool, Facts, Latched, Message, Request};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A request read from JSON without copying the strings it does not need to unescape.
///
/// Only what a policy can read is kept: `text` of messages and custom facts the policy never
/// mentions are validated as JSON and skipped.
#[derive(Debug, Default)]
pub(crate) struct RequestView<'a> {
    pub(crate) facts: FactsView<'a>,
    pub(crate) calls: Vec<CallView<'a>>,
    pub(crate) policy: Option<Cow<'a, str>>,
    /// The server's session id, read in the same pass (the engine itself keeps no state).
    pub(crate) session: Option<Cow<'a, str>>,
    /// The server's turn id, read in the same pass.
    pub(crate) turn: Option<Cow<'a, str>>,
}

/// The borrowed facts.
#[derive(Debug, Default)]
pub(crate) struct FactsView<'a> {
    pub(crate) stage: Option<Cow<'a, str>>,
    pub(crate) stage_turns: Option<u64>,
    pub(crate) latched: LatchedView<'a>,
    pub(crate) messages: Option<MessageTable<'a>>,
    pub(crate) fields: Option<Map<String, Value>>,
    pub(crate) called: Option<Vec<CalledView<'a>>>,
    /// `facts.approvals`, each checked to be a digest's shape.
    pub(crate) approvals: Option<Vec<Cow<'a, str>>>,
    /// `facts.principal`, checked to have the principal's shape.
    pub(crate) principal: Option<Value>,
    /// `facts.spent`, in document order (a duplicate key is refused by the reader).
    pub(crate) spent: Option<Vec<(Cow<'a, str>, f64)>>,
    /// `facts.prompt`.
    pub(crate) prompt: Option<Cow<'a, str>>,
    /// `facts.outputs`, checked to have its shape.
    pub(crate) outputs: Option<Value>,
    /// Custom facts the policy reads, in document order (a later duplicate wins).
    pub(crate) other: Vec<(Cow<'a, str>, Value)>,
}

/// The borrowed `latched` fact.
#[derive(Debug)]
pub(crate) enum LatchedView<'a> {
    Flag(bool),
    ByName(Vec<(Cow<'a, str>, bool)>),
}

impl LatchedView<'_> {
    /// This latch fact unioned with `carried` (a session's state): a latch set in either is
    /// set in the result. Goes through [`Latched::or`], so the union is the one the owned
    /// request gets.
    pub(crate) fn or(&self, carried: &Latched) -> LatchedView<'static> {
        let own = match self {
            LatchedView::Flag(b) => Latched::Flag(*b),
            LatchedView::ByName(v) => {
                Latched::ByName(v.iter().map(|(k, b)| (Arc::from(&**k), *b)).collect())
            }
        };
        match own.or(carried) {
            Latched::Flag(b) => LatchedView::Flag(b),
            Latched::ByName(m) => LatchedView::ByName(
                m.into_iter()
                    .map(|(k, b)| (Cow::Owned(k.to_string()), b))
                    .collect(),
            ),
        }
    }
}

impl Default for LatchedView<'_> {
    fn default() -> Self {
        LatchedView::Flag(false)
    }
}

/// The conversation as a flat table: one row per message, media kinds in one shared list.
#[derive(Debug, Default)]
pub(crate) struct MessageTable<'a> {
    /// Per message: sent by the client, and its range in `kinds`.
    pub(crate) rows: Vec<(bool, u32, u32)>,
    pub(crate) kinds: Vec<Cow<'a, str>>,
}

/// One borrowed call.
#[derive(Debug)]
pub(crate) struct CallView<'a> {
    pub(crate) id: Cow<'a, str>,
    pub(crate) tool: Cow<'a, str>,
    pub(crate) args: Value,
}

/// What the evaluator needs of one call.
pub(crate) trait CallLike {
    fn id(&self) -> &str;
    fn tool(&self) -> &str;
    fn args(&self) -> &Value;
}

impl CallLike for Call {
    fn id(&self) -> &str {
        &self.id
    }
    fn tool(&self) -> &str {
        &self.tool
    }
    fn args(&self) -> &Value {
        &self.args
    }
}

impl CallLike for CallView<'_> {
    fn id(&self) -> &str {
        &self.id
    }
    fn tool(&self) -> &str {
        &self.tool
    }
    fn args(&self) -> &Value {
        &self.args
    }
}

/// Facts, owned or borrowed.
#[derive(Clone, Copy)]
pub(crate) enum FactsRef<'a> {
    Owned(&'a Facts),
    Borrowed(&'a FactsView<'a>),
}

/// Messages, owned or borrowed.
#[derive(Clone, Copy)]
pub(crate) enum MessagesRef<'a> {
    Owned(&'a [Message]),
    Borrowed(&'a MessageTable<'a>),
}

/// The `latched` fact, owned or borrowed.
#[derive(Clone, Copy)]
pub(crate) enum LatchedRef<'a> {
    Flag(bool),
    Owned(&'a BTreeMap<Arc<str>, bool>),
    Borrowed(&'a [(Cow<'a, str>, bool)]),
}

/// Earlier calls, owned or borrowed.
#[derive(Clone, Copy)]
pub(crate) enum CalledRef<'a> {
    Owned(&'a [CalledTool]),
    Borrowed(&'a [CalledView<'a>]),
}

/// One earlier call as the one-pass reader borrowed it.
#[derive(Debug)]
pub(crate) struct CalledView<'a> {
    pub(crate) tool: Cow<'a, str>,
    pub(crate) ok: bool,
    pub(crate) turns_ago: Option<u64>,
}

impl<'a> From<&'a Request> for FactsRef<'a> {
    fn from(r: &'a Request) -> Self {
        FactsRef::Owned(&r.facts)
    }
}

impl<'a> FactsRef<'a> {
    pub(crate) fn stage(self) -> Option<&'a str> {
        match self {
            FactsRef::Owned(f) => f.stage.as_deref(),
            FactsRef::Borrowed(f) => f.stage.as_deref(),
        }
    }

    pub(crate) fn stage_turns(self) -> Option<u64> {
        match self {
            FactsRef::Owned(f) => f.stage_turns,
            FactsRef::Borrowed(f) => f.stage_turns,
        }
    }

    pub(crate) fn latched(self) -> LatchedRef<'a> {
        match self {
            FactsRef::Owned(f) => LatchedRef::from(&f.latched),
            FactsRef::Borrowed(f) => match &f.latched {
                LatchedView::Flag(b) => LatchedRef::Flag(*b),
                LatchedView::ByName(v) => LatchedRef::Borrowed(v),
            },
        }
    }

    pub(crate) fn messages(self) -> Option<MessagesRef<'a>> {
        match self {
            FactsRef::Owned(f) => f.messages.as_deref().map(MessagesRef::Owned),
            FactsRef::Borrowed(f) => f.messages.as_ref().map(MessagesRef::Borrowed),
        }
    }

    pub(crate) fn fields(self) -> Option<&'a Map<String, Value>> {
        match self {
            FactsRef::Owned(f) => f.fields.as_ref(),
            FactsRef::Borrowed(f) => f.fields.as_ref(),
        }
    }

    /// Whether `facts.approvals` holds the text of `digest`.
    pub(crate) fn approves(self, digest: &crate::approval::Raw) -> bool {
        match self {
            FactsRef::Owned(f) => f
                .approvals
                .iter()
                .flatten()
                .any(|a| crate::approval::matches(digest, a)),
            FactsRef::Borrowed(f) => f
                .approvals
                .iter()
                .flatten()
                .any(|a| crate::approval::matches(digest, a)),
        }
    }

    /// Whether the request carries any approval (only then is a digest worth computing while
    /// judging).
    pub(crate) fn has_approvals(self) -> bool {
        match self {
            FactsRef::Owned(f) => f.approvals.as_ref().is_some_and(|a| !a.is_empty()),
            FactsRef::Borrowed(f) => f.approvals.as_ref().is_some_and(|a| !a.is_empty()),
        }
    }

    pub(crate) fn called(self) -> Option<CalledRef<'a>> {
        match self {
            FactsRef::Owned(f) => f.called.as_deref().map(CalledRef::Owned),
            FactsRef::Borrowed(f) => f.called.as_deref().map(CalledRef::Borrowed),
        }
    }

    /// `facts.prompt`.
    pub(crate) fn prompt(self) -> Option<&'a str> {
        match self {
            FactsRef::Owned(f) => f.prompt.as_deref(),
            FactsRef::Borrowed(f) => f.prompt.as_deref(),
        }
    }

    /// `facts.outputs`.
    pub(crate) fn outputs(self) -> Option<&'a Value> {
        match self {
            FactsRef::Owned(f) => f.outputs.as_ref(),
            FactsRef::Borrowed(f) => f.outputs.as_ref(),
        }
    }

    /// `facts.spent` of the budget `name`.
    pub(crate) fn spent(self, name: &str) -> Option<f64> {
        match self {
            FactsRef::Owned(f) => f.spent.as_ref()?.get(name).copied(),
            FactsRef::Borrowed(f) => f
                .spent
                .as_ref()?
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, n)| *n),
        }
    }

    /// The first budget name `facts.spent` gives for which `pred` holds (allocates nothing).
    pub(crate) fn find_spent_name(self, pred: impl Fn(&str) -> bool) -> Option<&'a str> {
        match self {
            FactsRef::Owned(f) => f
                .spent
                .iter()
                .flatten()
                .map(|(k, _)| k.as_str())
                .find(|k| pred(k)),
            FactsRef::Borrowed(f) => f
                .spent
                .iter()
                .flatten()
                .map(|(k, _)| &**k)
                .find(|k| pred(k)),
        }
    }

    /// `facts.principal`.
    pub(crate) fn principal(self) -> Option<&'a Value> {
        match self {
            FactsRef::Owned(f) => f.principal.as_ref(),
            FactsRef::Borrowed(f) => f.principal.as_ref(),
        }
    }

    /// A custom fact by its top-level key.
    pub(crate) fn other(self, key: &str) -> Option<&'a Value> {
        match self {
            FactsRef::Owned(f) => f.other.get(key),
            FactsRef::Borrowed(f) => f.other.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
        }
    }
}

impl<'a> From<&'a Latched> for LatchedRef<'a> {
    fn from(latched: &'a Latched) -> Self {
        match latched {
            Latched::Flag(b) => LatchedRef::Flag(*b),
            Latched::ByName(m) => LatchedRef::Owned(m),
        }
    }
}

impl<'a> LatchedRef<'a> {
    /// The named flags, in no particular order; none for the one-flag form. The readers refuse
    /// a name given twice, so each name appears once.
    pub(crate) fn entries(self) -> impl Iterator<Item = (&'a str, bool)> {
        let (owned, borrowed) = match self {
            LatchedRef::Flag(_) => (None, None),
            LatchedRef::Owned(m) => (Some(m.iter().map(|(k, v)| (&**k, *v))), None),
            LatchedRef::Borrowed(v) => (None, Some(v.iter().map(|(k, b)| (&**k, *b)))),
        };
        owned
            .into_iter()
            .flatten()
            .chain(borrowed.into_iter().flatten())
    }

    /// True when any flag is set.
    pub(crate) fn any(self) -> bool {
        match self {
            LatchedRef::Flag(b) => b,
            named => named.entries().any(|(_, set)| set),
        }
    }
}

/// True for a message written by the customer. A slice pattern compiles to a length test
/// and two inline word compares; `==` on `str` calls `memcmp` once per message scanned.
#[inline]
pub(crate) fn from_client(from: &str) -> bool {
    matches!(from.as_bytes(), b"client")
}

impl MessagesRef<'_> {
    /// True when one of the last `within` client messages carries media of one of `kinds`
    /// (any kind when `kinds` is empty).
    pub(crate) fn client_sent_media(self, within: usize, kinds: &[Box<str>]) -> bool {
        let wanted = |k: &str| kinds.is_empty() || kinds.iter().any(|w| **w == *k);
        match self {
            MessagesRef::Owned(ms) => ms
                .iter()
                .rev()
                .filter(|m| from_client(&m.from))
                .take(within)
                .any(|m| m.media.iter().any(|k| wanted(k))),
            MessagesRef::Borrowed(t) => t
                .rows
                .iter()
                .rev()
                .filter(|(client, _, _)| *client)
                .take(within)
                .any(|&(_, start, end)| {
                    t.kinds[start as usize..end as usize]
                        .iter()
                        .any(|k| wanted(k))
                }),
        }
    }

    /// True when the conversation has at least `n` client messages.
    pub(crate) fn client_count_at_least(self, n: u64) -> bool {
        let Ok(need) = usize::try_from(n) else {
            return false;
        };
        if need == 0 {
            return true;
        }
        let clients = match self {
            MessagesRef::Owned(ms) => ms.iter().filter(|m| from_client(&m.from)).count(),
            MessagesRef::Borrowed(t) => t.rows.iter().filter(|r| r.0).count(),
        };
        clients >= need
    }
}

impl CalledRef<'_> {
    /// True when an earlier call of `tool` succeeded.
    pub(crate) fn succeeded(self, tool: &str) -> bool {
        match self {
            CalledRef::Owned(cs) => cs.iter().any(|c| c.ok && c.tool == tool),
            CalledRef::Borrowed(cs) => cs.iter().any(|c| c.ok && c.tool == tool),
        }
    }

    /// Whether `tool` succeeded fewer than `turns` turns ago (`turns_ago` 0 is this turn).
    /// A successful call without `turns_ago` cannot show its age: unless another one proves
    /// the call recent, the answer is unknown as invalid, not absent, so it denies even
    /// under `on_missing allow` and under a `not`.
    pub(crate) fn succeeded_within(self, tool: &str, turns: u64) -> Truth {
        let mut undated = false;
        let mut each = |ok: bool, name: &str, ago: Option<u64>| {
            if ok && name == tool {
                match ago {
                    Some(a) if a < turns => return true,
                    None => undated = true,
                    Some(_) => {}
                }
            }
            false
        };
        let recent = match self {
            CalledRef::Owned(cs) => cs.iter().any(|c| each(c.ok, &c.tool, c.turns_ago)),
            CalledRef::Borrowed(cs) => cs.iter().any(|c| each(c.ok, &c.tool, c.turns_ago)),
        };
        match (recent, undated) {
            (true, _) => Truth::True,
            (false, true) => Truth::Unknown(INVALID),
            (false, false) => Truth::False,
        }
    }
}
