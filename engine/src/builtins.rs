//! The built-in preconditions, each written once: its name, its parameters (labels,
//! defaults, clamps), how it lowers, what it reads from the facts, how a refusal states it,
//! how `explain` reports it and what it tells the invariant search.
//!
//! Everything that knows a built-in by name reads it from [`BUILTINS`]: the compiler's
//! argument binding and help texts (`compile.rs`), the refusal texts (`refusal.rs`),
//! `explain`, and the invariant search's guide (`toolgate-prove`). The compiled form is one
//! `Cond` variant, evaluated in `cond.rs` and explained here. ARCHITECTURE.md has the checklist
//! for adding one.

use crate::truth::{Truth, ABSENT};
use crate::wire::view::FactsRef;
use toolgate_lang::ast::{Call, CallValue};

/// The largest window a precondition may scan; larger ones are clamped with a warning.
pub const MAX_WINDOW: usize = 50;
/// The window of `client_sent_media` when none is given.
pub const DEFAULT_WINDOW: usize = 10;

/// A window of `n` messages as the engine scans it: at least 1, at most [`MAX_WINDOW`].
///
/// The one place a window is clamped. The compiler refuses 0 and warns above the cap; every
/// other reader of a written window (refusal texts, the invariant search) clamps through
/// here, so none of them can describe a different window than the one the engine scans.
pub fn clamp_window(n: u64) -> usize {
    usize::try_from(n.clamp(1, MAX_WINDOW as u64)).unwrap_or(MAX_WINDOW)
}

/// One built-in precondition.
#[derive(Debug)]
pub struct Builtin {
    /// The name a policy calls it by.
    pub name: &'static str,
    /// How help texts show a call of it.
    pub signature: &'static str,
    /// Its parameters, in positional order.
    pub params: &'static [Param],
    /// Builds the compiled precondition from the arguments, lowered by [`ParamKind`] and in
    /// parameter order.
    pub(crate) lower: fn(&mut Lowered) -> Pre,
    /// The requirement a default refusal states, from the written arguments (in parameter
    /// order; `None` where not given).
    pub(crate) requirement: fn(&[Option<&CallValue>]) -> String,
    /// What the model can do about an unmet requirement, as the default refusal tells it
    /// (a sentence without its full stop): ask the user for something, or call a tool first.
    pub(crate) remedy: &'static str,
}

/// The remedy of a requirement the user must meet.
const ASK_THE_USER: &str = "Ask the user for it, then call this function again";
/// The remedy of a requirement an earlier call meets.
const CALL_IT_FIRST: &str =
    "Call the tool it names first, and only go on once it has succeeded; then call this function again";

/// One parameter of a built-in.
#[derive(Debug)]
pub struct Param {
    /// Its label (`within: 5`).
    pub label: &'static str,
    /// What a value of it is, which fixes how it is checked and lowered.
    pub kind: ParamKind,
    /// How an error names a missing or malformed value (`needs a count`).
    pub what: &'static str,
    /// What the invariant search takes from its value.
    pub guides: Guidance,
}

/// The kinds of parameter value, each checked and lowered by the compiler in one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A message window: a whole number 1 to [`MAX_WINDOW`], clamped with a warning above it;
    /// [`DEFAULT_WINDOW`] when not given.
    Window,
    /// A whole number; required.
    Count,
    /// A field name (a name or string); required.
    Word,
    /// A tool the policy classifies; required.
    Tool,
    /// A non-empty list of media kinds; any kind when not given.
    MediaKinds,
    /// A number of turns, 1 or more (1 is the current turn); required.
    Turns,
}

/// What the invariant search takes from a parameter's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guidance {
    /// A message window or count to build message histories around; the default window
    /// when not given and the parameter is a [`ParamKind::Window`].
    Window,
    /// Media kinds to send.
    MediaKinds,
    /// Field names to fill and leave empty.
    Field,
    /// Tools to record as called.
    Tool,
    /// How many turns ago an earlier call may be: the search records calls at, just inside
    /// and just outside it.
    Turns,
}

/// An argument after the compiler checked it against its [`ParamKind`].
#[derive(Debug)]
pub(crate) enum Arg {
    /// A [`ParamKind::Window`], clamped.
    Window(usize),
    /// A [`ParamKind::Count`].
    Count(u64),
    /// A [`ParamKind::Word`] or [`ParamKind::Tool`].
    Word(Box<str>),
    /// A [`ParamKind::MediaKinds`]; empty for any kind.
    Words(Box<[Box<str>]>),
}

/// A built-in's lowered arguments, in parameter order, handed to [`Builtin::lower`].
pub(crate) struct Lowered(pub(crate) Vec<Arg>);

impl Lowered {
    fn window(&self, i: usize) -> usize {
        match self.0.get(i) {
            Some(Arg::Window(w)) => *w,
            _ => DEFAULT_WINDOW,
        }
    }

    fn count(&self, i: usize) -> u64 {
        match self.0.get(i) {
            Some(Arg::Count(n)) => *n,
            _ => 0,
        }
    }

    fn word(&mut self, i: usize) -> Box<str> {
        match self.0.get_mut(i) {
            Some(Arg::Word(w)) => std::mem::take(w),
            _ => Box::default(),
        }
    }

    fn words(&mut self, i: usize) -> Box<[Box<str>]> {
        match self.0.get_mut(i) {
            Some(Arg::Words(w)) => std::mem::take(w),
            _ => Box::default(),
        }
    }
}

/// Every built-in precondition.
pub static BUILTINS: &[Builtin] = &[
    Builtin {
        name: "client_sent_media",
        signature: "client_sent_media(within: N, kinds: [..])",
        params: &[
            Param {
                label: "within",
                kind: ParamKind::Window,
                what: "within",
                guides: Guidance::Window,
            },
            Param {
                label: "kinds",
                kind: ParamKind::MediaKinds,
                what: "kinds",
                guides: Guidance::MediaKinds,
            },
        ],
        lower: |a| Pre::ClientSentMedia {
            within: a.window(0),
            kinds: a.words(1),
        },
        requirement: |a| {
            let n = match a.first().copied().flatten() {
                Some(CallValue::Number(n)) => clamp_window(*n as u64),
                _ => DEFAULT_WINDOW,
            };
            let kinds = match a.get(1).copied().flatten() {
                Some(CallValue::List(items)) if !items.is_empty() => {
                    let names: Vec<String> = items
                        .iter()
                        .map(|i| crate::text::call_value(&i.node))
                        .collect();
                    format!(
                        "{} {}",
                        crate::text::article_word(&names[0]),
                        names.join("/")
                    )
                }
                _ => "a media".into(),
            };
            format!("the customer must have sent {kinds} attachment in their last {n} messages")
        },
        remedy: ASK_THE_USER,
    },
    Builtin {
        name: "field_filled",
        signature: "field_filled(NAME)",
        params: &[Param {
            label: "field",
            kind: ParamKind::Word,
            what: "field",
            guides: Guidance::Field,
        }],
        lower: |a| Pre::FieldFilled(a.word(0)),
        requirement: |a| format!("the `{}` field must be filled in", text(a, 0)),
        remedy: ASK_THE_USER,
    },
    Builtin {
        name: "called_before",
        signature: "called_before(TOOL)",
        params: &[Param {
            label: "tool",
            kind: ParamKind::Tool,
            what: "tool",
            guides: Guidance::Tool,
        }],
        lower: |a| Pre::CalledBefore(a.word(0)),
        requirement: |a| {
            format!(
                "`{}` must have been called successfully earlier in this conversation",
                text(a, 0)
            )
        },
        remedy: CALL_IT_FIRST,
    },
    Builtin {
        name: "min_client_messages",
        signature: "min_client_messages(N)",
        params: &[Param {
            label: "count",
            kind: ParamKind::Count,
            what: "a count",
            guides: Guidance::Window,
        }],
        lower: |a| Pre::MinClientMessages(a.count(0)),
        requirement: |a| {
            format!(
                "the customer must have sent at least {} messages",
                text(a, 0)
            )
        },
        remedy: ASK_THE_USER,
    },
    Builtin {
        name: "called_within",
        signature: "called_within(TOOL, turns: N)",
        params: &[
            Param {
                label: "tool",
                kind: ParamKind::Tool,
                what: "tool",
                guides: Guidance::Tool,
            },
            Param {
                label: "turns",
                kind: ParamKind::Turns,
                what: "a number of turns",
                guides: Guidance::Turns,
            },
        ],
        lower: |a| Pre::CalledWithin {
            tool: a.word(0),
            turns: a.count(1),
        },
        requirement: |a| match a.get(1).copied().flatten() {
            Some(CallValue::Number(n)) if *n == 1.0 => format!(
                "`{}` must have been called successfully in this turn",
                text(a, 0)
            ),
            _ => format!(
                "`{}` must have been called successfully within the last {} turns",
                text(a, 0),
                text(a, 1)
            ),
        },
        remedy: CALL_IT_FIRST,
    },
];

/// The written argument `i` as text, empty when not given.
fn text(a: &[Option<&CallValue>], i: usize) -> String {
    a.get(i)
        .copied()
        .flatten()
        .map(crate::text::call_value)
        .unwrap_or_default()
}

/// The built-in called `name`.
pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// Every built-in's signature, for help texts.
pub(crate) fn signatures() -> String {
    BUILTINS
        .iter()
        .map(|b| b.signature)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Builtin {
    /// The written value of each parameter of `call`, in parameter order: the one labelled
    /// with it, else the unlabelled one at its position. Lenient (a wrong label or extra
    /// argument is ignored), for readers of policies the compiler has already checked.
    pub fn written<'a>(&self, call: &'a Call) -> Vec<Option<&'a CallValue>> {
        self.params
            .iter()
            .enumerate()
            .map(|(pos, p)| {
                call.args
                    .iter()
                    .find(|a| a.label.as_ref().is_some_and(|l| l.name == p.label))
                    .or_else(|| call.args.get(pos).filter(|a| a.label.is_none()))
                    .map(|a| &a.value.node)
            })
            .collect()
    }
}

/// A compiled built-in precondition: one variant per entry of [`BUILTINS`]. It reads only
/// the standard facts, and is unknown (so denies, even under `not`) when the fact it reads
/// was not supplied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pre {
    /// `client_sent_media(within, kinds)`; empty `kinds` is any kind.
    ClientSentMedia {
        within: usize,
        kinds: Box<[Box<str>]>,
    },
    /// `field_filled(NAME)`.
    FieldFilled(Box<str>),
    /// `called_before(TOOL)`.
    CalledBefore(Box<str>),
    /// `min_client_messages(N)`.
    MinClientMessages(u64),
    /// `called_within(TOOL, turns: N)`: a successful call whose `turns_ago` is below `turns`.
    CalledWithin { tool: Box<str>, turns: u64 },
}

impl Pre {
    /// Whether the precondition holds for these facts.
    pub(crate) fn eval(&self, facts: FactsRef<'_>) -> Truth {
        match self {
            Pre::ClientSentMedia { within, kinds } => match facts.messages() {
                None => Truth::Unknown(ABSENT),
                Some(ms) => Truth::from_bool(ms.client_sent_media(*within, kinds)),
            },
            Pre::FieldFilled(name) => match facts.fields() {
                None => Truth::Unknown(ABSENT),
                Some(fields) => {
                    Truth::from_bool(fields.get(&**name).is_some_and(crate::filled::is_filled))
                }
            },
            Pre::CalledBefore(tool) => match facts.called() {
                None => Truth::Unknown(ABSENT),
                Some(called) => Truth::from_bool(called.succeeded(tool)),
            },
            Pre::MinClientMessages(n) => match facts.messages() {
                None => Truth::Unknown(ABSENT),
                Some(ms) => Truth::from_bool(ms.client_count_at_least(*n)),
            },
            Pre::CalledWithin { tool, turns } => match facts.called() {
                None => Truth::Unknown(ABSENT),
                Some(called) => called.succeeded_within(tool, *turns),
            },
        }
    }

    /// What `explain` reports: the fact read and what it showed.
    pub(crate) fn explain(&self, facts: FactsRef<'_>) -> String {
        match self {
            Pre::ClientSentMedia { within, kinds } => match facts.messages() {
                None => "messages absent".into(),
                Some(ms) => {
                    let found = ms.client_sent_media(*within, kinds);
                    let wanted = if kinds.is_empty() {
                        "any".to_string()
                    } else {
                        kinds.join(" or ")
                    };
                    let verb = if found { "has" } else { "has no" };
                    format!("the last {within} client messages: {verb} media of kind {wanted}")
                }
            },
            Pre::FieldFilled(name) => match facts.fields() {
                None => "fields absent".into(),
                Some(f) => match f.get(&**name) {
                    None => format!("field `{name}` missing"),
                    Some(v) => format!("field `{name}` = {}", crate::text::short(v)),
                },
            },
            Pre::CalledBefore(tool) => match facts.called() {
                None => "called absent".into(),
                Some(c) if c.succeeded(tool) => format!("`{tool}` succeeded earlier"),
                Some(_) => format!("no earlier successful `{tool}`"),
            },
            Pre::MinClientMessages(n) => match facts.messages() {
                None => "messages absent".into(),
                Some(ms) => {
                    let verb = if ms.client_count_at_least(*n) {
                        "at least"
                    } else {
                        "fewer than"
                    };
                    format!("{verb} {n} client messages")
                }
            },
            Pre::CalledWithin { tool, turns } => match facts.called() {
                None => "called absent".into(),
                Some(c) => match c.succeeded_within(tool, *turns) {
                    Truth::True => format!("`{tool}` succeeded within the last {turns} turns"),
                    Truth::False => {
                        format!("no successful `{tool}` within the last {turns} turns")
                    }
                    Truth::Unknown(_) => format!(
                        "an earlier successful `{tool}` has no `turns_ago`, so its age is unknown"
                    ),
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Policy, Request};

    /// A value of each kind that compiles in [`policy_with`]'s policy.
    fn sample(kind: ParamKind) -> &'static str {
        match kind {
            ParamKind::Window => "3",
            ParamKind::Count => "2",
            ParamKind::Word => "phone",
            ParamKind::Tool => "a",
            ParamKind::MediaKinds => "[image]",
            ParamKind::Turns => "2",
        }
    }

    /// [`sample`] as the parser gives it.
    fn value(kind: ParamKind) -> CallValue {
        match kind {
            ParamKind::Window => CallValue::Number(3.0),
            ParamKind::Count | ParamKind::Turns => CallValue::Number(2.0),
            ParamKind::Word => CallValue::Name("phone".into()),
            ParamKind::Tool => CallValue::Name("a".into()),
            ParamKind::MediaKinds => CallValue::List(vec![toolgate_lang::ast::Spanned {
                node: CallValue::Name("image".into()),
                span: toolgate_lang::Span::new(0, 0),
            }]),
        }
    }

    fn policy_with(call: &str) -> Result<Policy, crate::CompileError> {
        Policy::compile(
            "t.gate",
            &format!(
                "module m\nwrite a\nstage s {{ tools [a] }}\nrule r for a {{ require {call} }}\n"
            ),
        )
    }

    fn errors(call: &str) -> Vec<String> {
        match policy_with(call) {
            Ok(_) => Vec::new(),
            Err(e) => e.diagnostics.iter().map(|d| d.message.clone()).collect(),
        }
    }

    /// Every entry's every parameter, by label and by position, compiles; so no entry can
    /// be listed but lowered as another (the old two-`match` drift).
    #[test]
    fn every_builtin_compiles_by_label_and_by_position() {
        for b in BUILTINS {
            let labelled: Vec<String> = b
                .params
                .iter()
                .map(|p| format!("{}: {}", p.label, sample(p.kind)))
                .collect();
            let positional: Vec<&str> = b.params.iter().map(|p| sample(p.kind)).collect();
            for call in [
                format!("{}({})", b.name, labelled.join(", ")),
                format!("{}({})", b.name, positional.join(", ")),
            ] {
                assert_eq!(errors(&call), Vec::<String>::new(), "{call}");
            }
        }
    }

    #[test]
    fn a_wrong_label_names_the_entrys_parameters() {
        for b in BUILTINS {
            let errs = errors(&format!("{}(nope: 1)", b.name));
            assert_eq!(
                errs,
                vec![format!("`{}` has no parameter `nope`", b.name)],
                "{}",
                b.name
            );
        }
    }

    #[test]
    fn a_required_parameter_left_out_is_an_error_and_an_optional_one_is_not() {
        for b in BUILTINS {
            let required = b.params.iter().find(|p| {
                matches!(
                    p.kind,
                    ParamKind::Count | ParamKind::Word | ParamKind::Tool | ParamKind::Turns
                )
            });
            let errs = errors(&format!("{}()", b.name));
            match required {
                Some(p) => assert_eq!(errs, vec![format!("`{}` needs {}", b.name, p.what)]),
                None => assert_eq!(errs, Vec::<String>::new(), "{}", b.name),
            }
        }
    }

    #[test]
    fn the_unknown_builtin_help_lists_every_entry() {
        let Err(e) = policy_with("no_such_builtin(1)") else {
            panic!("an unknown built-in compiled");
        };
        let help = e.diagnostics[0].help.clone().unwrap_or_default();
        for b in BUILTINS {
            assert!(help.contains(b.signature), "{help} lacks {}", b.signature);
            assert!(b.signature.starts_with(&format!("{}(", b.name)));
        }
    }

    /// Each entry's refusal states its own requirement, never the generic fallback.
    #[test]
    fn every_builtin_refusal_states_its_requirement() {
        let request = Request::from_json(
            r#"{"facts":{"stage":"s","messages":[],"fields":{},"called":[]},"calls":[{"id":"c","tool":"a","args":{}}]}"#,
        )
        .unwrap();
        for b in BUILTINS {
            let args: Vec<&str> = b.params.iter().map(|p| sample(p.kind)).collect();
            let call = format!("{}({})", b.name, args.join(", "));
            let policy = policy_with(&call).unwrap();
            let shown = serde_json::to_string(&policy.decide(&request)).unwrap();
            assert!(shown.contains("\"allow\":false"), "{call}: {shown}");
            assert!(!shown.contains("must hold"), "{call}: {shown}");
            let values: Vec<CallValue> = b.params.iter().map(|p| value(p.kind)).collect();
            let written: Vec<Option<&CallValue>> = values.iter().map(Some).collect();
            let requirement = (b.requirement)(&written);
            assert!(
                shown.contains(&requirement),
                "{call}: {shown} lacks {requirement}"
            );
        }
    }
}
