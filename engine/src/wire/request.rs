//! The typed request: facts about the conversation and the batch of calls to judge.
//!
//! Requests can be built in Rust directly or read from JSON with [`Request::from_json`].
//! Standard facts of the wrong JSON type make the request malformed: the error names the
//! field, because a silent default here would quietly change a security decision. For the
//! same reason every object of the schema is closed (see [`crate::wire::schema`]): a key it does not
//! name is an error with a did-you-mean, never ignored, so a call sent with `arguments`
//! instead of `args` is refused rather than judged with no arguments.

use crate::error::RequestError;
use crate::wire::schema as key;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use toolgate_lang::did_you_mean;

/// One batch of tool calls and the facts they are judged against.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(
    feature = "json-schema",
    derive(schemars::JsonSchema),
    schemars(deny_unknown_fields)
)]
pub struct Request {
    /// What the executor knows about the conversation.
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<Facts>"))]
    pub facts: Facts,
    /// The calls the model asked for, in the model's order.
    pub calls: Vec<Call>,
    /// The policy module the request is meant for, if the caller names one.
    pub policy: Option<String>,
    /// The executor's session id (used by the decision server).
    pub session: Option<String>,
    /// The executor's user-turn id (used by the decision server).
    pub turn: Option<String>,
}

/// The facts the executor supplies. Every field is optional.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Facts {
    /// The active stage of the conversation.
    pub stage: Option<String>,
    /// How many turns the active stage has used; absent counts as 0.
    pub stage_turns: Option<u64>,
    /// Latch state carried from earlier batches of the same user turn.
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<Latched>"))]
    pub latched: Latched,
    /// The conversation, oldest first; absent when the executor could not read it.
    pub messages: Option<Vec<Message>>,
    /// Filled-in fields (a CRM lead, a claim form).
    pub fields: Option<Map<String, Value>>,
    /// Earlier tool calls in this conversation and whether they succeeded.
    pub called: Option<Vec<CalledTool>>,
    /// Approvals a person granted: the `approval` digests of asks (see `docs/language.md`,
    /// "Asking a person"). Each turns exactly the call it was asked for into an allow.
    #[cfg_attr(
        feature = "json-schema",
        schemars(with = "Option<Vec<crate::wire::json_schema::ApprovalDigest>>")
    )]
    pub approvals: Option<Vec<String>>,
    /// Who the agent acts for: an object with `sub`, `tenant` and `claims`, each optional
    /// (`crate::principal_value` builds one). Rules read it as `principal.sub`,
    /// `principal.tenant`, `principal.claims.NAME`.
    #[cfg_attr(
        feature = "json-schema",
        schemars(with = "Option<crate::wire::json_schema::Principal>")
    )]
    pub principal: Option<Value>,
    /// Per budget that counts across batches (`per turn`, `session`, `principal`,
    /// `tenant`): what its scope has consumed so far in its window. Whoever keeps the counts
    /// supplies it; a budget whose count is missing denies, since its state is unknown.
    #[cfg_attr(
        feature = "json-schema",
        schemars(with = "Option<BTreeMap<String, crate::wire::json_schema::Count>>")
    )]
    pub spent: Option<BTreeMap<String, f64>>,
    /// The user's message of this turn (`facts.prompt`): a value in it is the user's own, for
    /// `from prompt` and to vouch for a value also seen in untrusted output.
    pub prompt: Option<String>,
    /// The outputs of this turn's earlier calls (`facts.outputs`): a list of `{id, tool,
    /// output}` objects, checked to have that shape, which `from ingest`, `mentions ingest`
    /// and `blocks tainted` read. Absent, such a test is unknown and denies.
    #[cfg_attr(
        feature = "json-schema",
        schemars(with = "Option<Vec<crate::wire::json_schema::Output>>")
    )]
    pub outputs: Option<Value>,
    /// Any other facts, reachable from rules as `facts.<key>`.
    #[cfg_attr(feature = "json-schema", schemars(flatten))]
    pub other: Map<String, Value>,
}

/// Latch state, owned: the `latched` fact of a request and the `latched` of a response
/// ([`crate::LatchState`] is this type). One flag, or one flag per named latch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Latched {
    /// One flag for every latch (the single-latch form). `true` sets every latch.
    Flag(bool),
    /// A flag per latch name. A request naming a latch the policy does not declare is
    /// malformed ([`crate::Policy::check_request`]).
    ByName(BTreeMap<Arc<str>, bool>),
}

impl Latched {
    /// True when any latch is set.
    pub fn any(&self) -> bool {
        match self {
            Latched::Flag(b) => *b,
            Latched::ByName(m) => m.values().any(|b| *b),
        }
    }

    /// The union of two latch states: a latch set in either is set in the result.
    pub fn or(&self, other: &Latched) -> Latched {
        match (self, other) {
            (Latched::Flag(true), _) | (_, Latched::Flag(true)) => Latched::Flag(true),
            (Latched::Flag(false), x) | (x, Latched::Flag(false)) => x.clone(),
            (Latched::ByName(a), Latched::ByName(b)) => {
                let mut m = a.clone();
                for (k, v) in b {
                    let e = m.entry(k.clone()).or_insert(false);
                    *e = *e || *v;
                }
                Latched::ByName(m)
            }
        }
    }
}

impl Default for Latched {
    fn default() -> Self {
        Latched::Flag(false)
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "json-schema",
    derive(schemars::JsonSchema),
    schemars(deny_unknown_fields, transform = crate::wire::json_schema::message_text)
)]
pub struct Message {
    /// Who wrote it: `client` for the customer, anything else for others.
    pub from: String,
    /// Kinds of media attached (`image`, `document`, ...); case-sensitive.
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<Vec<String>>"))]
    pub media: Vec<String>,
}

impl Message {
    /// A message from `from` carrying `media`.
    pub fn new(from: impl Into<String>, media: &[&str]) -> Self {
        Message {
            from: from.into(),
            media: media.iter().map(|m| m.to_string()).collect(),
        }
    }
}

/// An earlier call and its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "json-schema",
    derive(schemars::JsonSchema),
    schemars(deny_unknown_fields)
)]
pub struct CalledTool {
    /// The tool called.
    pub tool: String,
    /// Whether it succeeded; absent counts as false.
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<bool>"))]
    pub ok: bool,
    /// How many user turns ago it ran (0: the current turn), when the executor knows.
    /// `called_within` needs it; a call without it never counts as recent.
    pub turns_ago: Option<u64>,
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(
    feature = "json-schema",
    derive(schemars::JsonSchema),
    schemars(deny_unknown_fields)
)]
pub struct Call {
    /// The executor's id for the call, echoed in the decision.
    pub id: String,
    /// The tool name.
    pub tool: String,
    /// The arguments, a JSON object; absent is `{}`. Never JSON text: decode it first.
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<Map<String, Value>>"))]
    pub args: Value,
}

impl Call {
    /// A call of `tool` with `args`.
    pub fn new(id: impl Into<String>, tool: impl Into<String>, args: Value) -> Self {
        Call {
            id: id.into(),
            tool: tool.into(),
            args,
        }
    }
}

impl Request {
    /// A request with these facts and calls.
    pub fn new(facts: Facts, calls: Vec<Call>) -> Self {
        Request {
            facts,
            calls,
            ..Request::default()
        }
    }

    /// Reads a request from JSON text.
    ///
    /// Errors carry the line and column of bad JSON, or the path of the field that does not
    /// fit the schema (`facts.messages[2].from`).
    pub fn from_json(text: &str) -> Result<Self, RequestError> {
        Self::from_value(read_json(text)?)
    }

    /// Reads a request from an already parsed JSON value.
    pub fn from_value(value: Value) -> Result<Self, RequestError> {
        let mut top = top_object(value, &key::REQUEST_KEYS, || {
            format!(
                "a request has `{}`, `{}` and optionally `{}`, `{}`, `{}`",
                key::FACTS,
                key::CALLS,
                key::POLICY,
                key::SESSION,
                key::TURN
            )
        })?;
        let facts = match top.remove(key::FACTS) {
            None => Facts::default(),
            Some(v) => Facts::from_value(v)?,
        };
        let calls = match top.remove(key::CALLS) {
            Some(Value::Array(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, c)| Call::from_value(c, i))
                .collect::<Result<Vec<_>, _>>()?,
            Some(other) => {
                return Err(schema(
                    key::CALLS,
                    format!("expected an array, found {}", type_name(&other)),
                ))
            }
            None => {
                return Err(schema(
                    key::CALLS,
                    "missing field; send `\"calls\": []` for an empty batch",
                ))
            }
        };
        if let Some((first, again)) = repeated_id(calls.len(), |i| &calls[i].id) {
            return Err(repeated_id_error(&calls[again].id, first, again));
        }
        Ok(Request {
            facts,
            calls,
            policy: opt_string(&mut top, "", key::POLICY)?,
            session: opt_string(&mut top, "", key::SESSION)?,
            turn: opt_string(&mut top, "", key::TURN)?,
        })
    }
}

impl Facts {
    /// Facts with only a stage set.
    pub fn in_stage(stage: impl Into<String>) -> Self {
        Facts {
            stage: Some(stage.into()),
            ..Facts::default()
        }
    }

    /// Reads the facts from JSON text, as a request's `facts` field (see
    /// [`Facts::from_value`]).
    pub fn from_json(text: &str) -> Result<Self, RequestError> {
        Self::from_value(read_json(text)?)
    }

    /// Reads the facts from an already parsed JSON value, exactly as a request's `facts`
    /// field is read: `null` is no facts, and errors name the field as it sits in a request
    /// (`facts.stage`, `facts.messages[2].from`), so a facts file and a request body report
    /// the same paths.
    pub fn from_value(value: Value) -> Result<Self, RequestError> {
        let mut map = match value {
            Value::Null => return Ok(Facts::default()),
            Value::Object(map) => map,
            other => {
                return Err(schema(
                    key::FACTS,
                    format!("expected an object, found {}", type_name(&other)),
                ))
            }
        };
        let stage = opt_string(&mut map, key::FACTS, key::STAGE)?;
        let stage_turns = match map.remove(key::STAGE_TURNS) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| {
                schema(
                    &fact_path(key::STAGE_TURNS),
                    format!("expected a non-negative integer, found {}", describe(&v)),
                )
            })?),
        };
        let latched = match map.remove(key::LATCHED) {
            None | Some(Value::Null) => Latched::default(),
            Some(Value::Bool(b)) => Latched::Flag(b),
            Some(Value::Object(m)) => {
                let mut by_name = BTreeMap::new();
                for (k, v) in m {
                    let b = v.as_bool().ok_or_else(|| {
                        schema(
                            &format!("{}.{k}", fact_path(key::LATCHED)),
                            format!("expected a bool, found {}", type_name(&v)),
                        )
                    })?;
                    by_name.insert(k.into(), b);
                }
                Latched::ByName(by_name)
            }
            Some(v) => {
                return Err(schema(
                    &fact_path(key::LATCHED),
                    format!(
                        "expected a bool or an object of bools, found {}",
                        type_name(&v)
                    ),
                ))
            }
        };
        let messages = match map.remove(key::MESSAGES) {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, m)| Message::from_value(m, i))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(v) => {
                return Err(schema(
                    &fact_path(key::MESSAGES),
                    format!("expected an array, found {}", type_name(&v)),
                ))
            }
        };
        let fields = match map.remove(key::FIELDS) {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(v) => {
                return Err(schema(
                    &fact_path(key::FIELDS),
                    format!("expected an object, found {}", type_name(&v)),
                ))
            }
        };
        let called = match map.remove(key::CALLED) {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| CalledTool::from_value(c, i))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(v) => {
                return Err(schema(
                    &fact_path(key::CALLED),
                    format!("expected an array, found {}", type_name(&v)),
                ))
            }
        };
        let approvals = match map.remove(key::APPROVALS) {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| match v {
                        Value::String(s) if crate::approval::well_formed(&s) => Ok(s),
                        other => Err(schema(
                            &format!("{}[{i}]", fact_path(key::APPROVALS)),
                            format!(
                                "expected an approval digest (`{}` and 64 lowercase hex digits, as an ask's `approval` gives it), found {}",
                                crate::approval::PREFIX,
                                describe(&other)
                            ),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(v) => {
                return Err(schema(
                    &fact_path(key::APPROVALS),
                    format!("expected an array, found {}", type_name(&v)),
                ))
            }
        };
        let principal = match map.remove(key::PRINCIPAL) {
            None | Some(Value::Null) => None,
            Some(v) => {
                if let Err(e) = crate::wire::principal::check(&v) {
                    return Err(schema(
                        &format!("{}{}", fact_path(key::PRINCIPAL), e.at),
                        e.message,
                    ));
                }
                Some(v)
            }
        };
        let spent = match map.remove(key::SPENT) {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => {
                let mut out = BTreeMap::new();
                for (name, v) in m {
                    match v.as_f64().filter(|n| crate::budget::valid_count(*n)) {
                        Some(n) => {
                            out.insert(name, n);
                        }
                        None => {
                            return Err(schema(
                                &format!("{}.{name}", fact_path(key::SPENT)),
                                format!("expected a number of at least 0, found {}", describe(&v)),
                            ))
                        }
                    }
                }
                Some(out)
            }
            Some(v) => {
                return Err(schema(
                    &fact_path(key::SPENT),
                    format!(
                        "expected an object of budget names and numbers, found {}",
                        type_name(&v)
                    ),
                ))
            }
        };
        let prompt = opt_string(&mut map, key::FACTS, key::PROMPT)?;
        let outputs = match map.remove(key::OUTPUTS) {
            None | Some(Value::Null) => None,
            Some(v) => {
                if let Err(e) = crate::wire::outputs::check_outputs(&v) {
                    return Err(schema(
                        &format!("{}{}", fact_path(key::OUTPUTS), e.at),
                        e.message,
                    ));
                }
                Some(v)
            }
        };
        Ok(Facts {
            stage,
            stage_turns,
            latched,
            messages,
            fields,
            called,
            approvals,
            principal,
            spent,
            prompt,
            outputs,
            other: map,
        })
    }
}

impl Message {
    fn from_value(value: Value, i: usize) -> Result<Self, RequestError> {
        let at = format!("{}[{i}]", fact_path(key::MESSAGES));
        let Value::Object(mut m) = value else {
            return Err(schema(
                &at,
                format!("expected an object, found {}", type_name(&value)),
            ));
        };
        closed(&m, &at, &key::MESSAGE_KEYS, &key::MESSAGE_ALIASES, || {
            format!(
                "a message has `{}` and optionally `{}`, `{}`",
                key::FROM,
                key::MEDIA,
                key::TEXT
            )
        })?;
        let from = match m.remove(key::FROM) {
            Some(Value::String(s)) => s,
            Some(v) => {
                return Err(schema(
                    &format!("{at}.from"),
                    format!("expected a string, found {}", type_name(&v)),
                ))
            }
            None => return Err(schema(&format!("{at}.from"), "missing field")),
        };
        let media = match m.remove(key::MEDIA) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(kinds)) => kinds
                .into_iter()
                .enumerate()
                .map(|(j, k)| match k {
                    Value::String(s) => Ok(s),
                    other => Err(schema(
                        &format!("{at}.media[{j}]"),
                        format!("expected a string, found {}", type_name(&other)),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(v) => {
                return Err(schema(
                    &format!("{at}.media"),
                    format!("expected an array, found {}", type_name(&v)),
                ))
            }
        };
        Ok(Message { from, media })
    }
}

impl CalledTool {
    fn from_value(value: Value, i: usize) -> Result<Self, RequestError> {
        let at = format!("{}[{i}]", fact_path(key::CALLED));
        let Value::Object(mut m) = value else {
            return Err(schema(
                &at,
                format!("expected an object, found {}", type_name(&value)),
            ));
        };
        closed(&m, &at, &key::CALLED_KEYS, &key::CALLED_ALIASES, || {
            format!(
                "an earlier call has `{}` and optionally `{}`, `{}`",
                key::TOOL,
                key::OK,
                key::TURNS_AGO
            )
        })?;
        let tool = match m.remove(key::TOOL) {
            Some(Value::String(s)) => s,
            Some(v) => {
                return Err(schema(
                    &format!("{at}.tool"),
                    format!("expected a string, found {}", type_name(&v)),
                ))
            }
            None => return Err(schema(&format!("{at}.tool"), "missing field")),
        };
        let ok = match m.remove(key::OK) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(v) => {
                return Err(schema(
                    &format!("{at}.ok"),
                    format!("expected a bool, found {}", type_name(&v)),
                ))
            }
        };
        let turns_ago = match m.remove(key::TURNS_AGO) {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
            Some(v) => {
                return Err(schema(
                    &format!("{at}.turns_ago"),
                    format!("expected a whole number 0 or more, found {}", describe(&v)),
                ))
            }
        };
        Ok(CalledTool {
            tool,
            ok,
            turns_ago,
        })
    }
}

impl Call {
    fn from_value(value: Value, i: usize) -> Result<Self, RequestError> {
        let at = format!("{}[{i}]", key::CALLS);
        let Value::Object(mut m) = value else {
            return Err(schema(
                &at,
                format!("expected an object, found {}", type_name(&value)),
            ));
        };
        // Before the fields are read: a call with `name` and `arguments` is told to say
        // `tool` and `args`, not that its `tool` is missing.
        closed(&m, &at, &key::CALL_KEYS, &key::CALL_ALIASES, || {
            format!(
                "a call has `{}`, `{}` and optionally `{}`",
                key::ID,
                key::TOOL,
                key::ARGS
            )
        })?;
        let id = match m.remove(key::ID) {
            Some(Value::String(s)) => s,
            Some(v) => {
                return Err(schema(
                    &format!("{at}.id"),
                    format!("expected a string, found {}", type_name(&v)),
                ))
            }
            None => {
                return Err(schema(
                    &format!("{at}.id"),
                    "missing field; every call needs an id to match its decision",
                ))
            }
        };
        let tool = match m.remove(key::TOOL) {
            Some(Value::String(s)) => s,
            Some(v) => {
                return Err(schema(
                    &format!("{at}.tool"),
                    format!("expected a string, found {}", type_name(&v)),
                ))
            }
            None => return Err(schema(&format!("{at}.tool"), "missing field")),
        };
        let args = match m.remove(key::ARGS) {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v,
            Some(Value::String(_)) => {
                return Err(schema(
                    &format!("{at}.args"),
                    "expected an object, found a string; decode JSON-encoded arguments before sending them",
                ))
            }
            Some(v) => return Err(schema(&format!("{at}.args"), format!("expected an object, found {}", type_name(&v)))),
        };
        Ok(Call { id, tool, args })
    }
}

/// The first call whose id an earlier call already has, as (earlier, later) indices, for a
/// batch of `n` calls whose ids `id` gives. Small batches compare pairwise, allocating
/// nothing; larger ones use a hash map.
pub(crate) fn repeated_id<'a>(n: usize, id: impl Fn(usize) -> &'a str) -> Option<(usize, usize)> {
    const PAIRWISE: usize = 32;
    if n <= PAIRWISE {
        return (1..n).find_map(|j| (0..j).find(|&i| id(i) == id(j)).map(|i| (i, j)));
    }
    let mut seen = rustc_hash::FxHashMap::with_capacity_and_hasher(n, Default::default());
    (0..n).find_map(|j| seen.insert(id(j), j).map(|i| (i, j)))
}

/// The error for `calls[again]` repeating the id of `calls[first]`.
pub(crate) fn repeated_id_error(id: &str, first: usize, again: usize) -> RequestError {
    schema(
        &format!("{}[{again}].{}", key::CALLS, key::ID),
        format!(
            "the id `{id}` is also the id of calls[{first}]; executors map decisions back by \
             id, so every call needs its own"
        ),
    )
}

/// The optional string at `name` of an object; `parent` is the object's own path (empty for
/// the request body), for the error.
pub(crate) fn opt_string(
    map: &mut Map<String, Value>,
    parent: &str,
    name: &str,
) -> Result<Option<String>, RequestError> {
    match map.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => {
            let path = if parent.is_empty() {
                name.to_string()
            } else {
                format!("{parent}.{name}")
            };
            Err(schema(
                &path,
                format!("expected a string, found {}", type_name(&v)),
            ))
        }
    }
}

/// The path of the standard fact `name` inside a request, for errors (`facts.stage`).
fn fact_path(name: &str) -> String {
    format!("{}.{name}", key::FACTS)
}

/// Parses JSON text, keeping serde_json's line and column on failure and refusing a key
/// given twice (see [`crate::wire::strict_json`]).
pub(crate) fn read_json(text: &str) -> Result<Value, RequestError> {
    crate::wire::strict_json::parse(text)
}

/// The top-level object of a request body, refusing keys outside `allowed`; `shape` (built
/// only on failure) says what the body may hold, for the error. A standard fact sent at the
/// top level is pointed to its place inside `facts`.
pub(crate) fn top_object(
    value: Value,
    allowed: &[&str],
    shape: impl FnOnce() -> String,
) -> Result<Map<String, Value>, RequestError> {
    let Value::Object(top) = value else {
        return Err(schema(
            "",
            format!("expected an object, found {}", type_name(&value)),
        ));
    };
    if let Some(name) = first_unknown(&top, allowed) {
        let hint = if key::STANDARD_FACTS.contains(&name) {
            Some(format!("{}.{name}", key::FACTS))
        } else {
            meant(name, allowed, &key::REQUEST_ALIASES).map(str::to_string)
        };
        return Err(unknown_key("", name, hint.as_deref(), &shape()));
    }
    Ok(top)
}

/// Refuses an object of the schema holding a key outside `known`: the error names the first
/// such key (in key order) at its path under `at`, with the key it most likely meant from
/// `aliases` or by spelling, and `shape` (built only on failure) says what the object holds.
fn closed(
    object: &Map<String, Value>,
    at: &str,
    known: &[&str],
    aliases: &[(&str, &'static str)],
    shape: impl FnOnce() -> String,
) -> Result<(), RequestError> {
    match first_unknown(object, known) {
        None => Ok(()),
        Some(name) => Err(unknown_key(at, name, meant(name, known, aliases), &shape())),
    }
}

/// The first key of `object` (in key order) that `known` does not hold.
fn first_unknown<'m>(object: &'m Map<String, Value>, known: &[&str]) -> Option<&'m str> {
    object
        .keys()
        .map(String::as_str)
        .find(|k| !known.contains(k))
}

/// The key `name` most likely stands for: the one an alias (a name copied from a model API,
/// compared ASCII case-insensitively) maps it to, else the closest known key by spelling.
fn meant<'k>(name: &str, known: &[&'k str], aliases: &[(&str, &'k str)]) -> Option<&'k str> {
    aliases
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .map(|(_, k)| *k)
        .or_else(|| did_you_mean(name, known.iter().copied()))
}

/// The error for the unknown key `name` of the object at `at`, with the hint and the shape.
fn unknown_key(at: &str, name: &str, hint: Option<&str>, shape: &str) -> RequestError {
    let path = if at.is_empty() {
        name.to_string()
    } else {
        format!("{at}.{name}")
    };
    let hint = hint
        .map(|h| format!("did you mean `{h}`? "))
        .unwrap_or_default();
    schema(&path, format!("unknown field; {hint}{shape}"))
}

/// A schema error at `path` (the whole body when `path` is empty).
pub(crate) fn schema(path: &str, message: impl Into<String>) -> RequestError {
    RequestError::Schema {
        path: if path.is_empty() {
            "(request)".to_string()
        } else {
            path.to_string()
        },
        message: message.into(),
    }
}

/// The JSON type of a value, with an article, for error messages.
pub(crate) use crate::text::type_name;

fn describe(v: &Value) -> String {
    match v {
        Value::Number(n) => format!("the number {n}"),
        other => type_name(other).to_string(),
    }
}

impl<'de> serde::Deserialize<'de> for Request {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = crate::wire::strict_json::deserialize(d)?;
        Request::from_value(value).map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for Request {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl Request {
    /// The request as JSON, in the shape [`Request::from_json`] reads.
    pub fn to_value(&self) -> Value {
        let mut facts = self.facts.other.clone();
        let f = &self.facts;
        if let Some(s) = &f.stage {
            facts.insert(key::STAGE.into(), Value::from(s.clone()));
        }
        if let Some(t) = f.stage_turns {
            facts.insert(key::STAGE_TURNS.into(), Value::from(t));
        }
        match &f.latched {
            Latched::Flag(b) => {
                facts.insert(key::LATCHED.into(), Value::from(*b));
            }
            Latched::ByName(m) => {
                let obj: Map<String, Value> = m
                    .iter()
                    .map(|(k, v)| (k.to_string(), Value::from(*v)))
                    .collect();
                facts.insert(key::LATCHED.into(), Value::Object(obj));
            }
        }
        if let Some(ms) = &f.messages {
            let arr = ms
                .iter()
                .map(|m| {
                    object([
                        (key::FROM, Value::from(m.from.clone())),
                        (key::MEDIA, Value::from(m.media.clone())),
                    ])
                })
                .collect();
            facts.insert(key::MESSAGES.into(), Value::Array(arr));
        }
        if let Some(fields) = &f.fields {
            facts.insert(key::FIELDS.into(), Value::Object(fields.clone()));
        }
        if let Some(cs) = &f.called {
            let arr = cs
                .iter()
                .map(|c| {
                    let mut entry = serde_json::Map::new();
                    entry.insert(key::TOOL.into(), Value::from(c.tool.clone()));
                    entry.insert(key::OK.into(), Value::from(c.ok));
                    if let Some(ago) = c.turns_ago {
                        entry.insert(key::TURNS_AGO.into(), Value::from(ago));
                    }
                    Value::Object(entry)
                })
                .collect();
            facts.insert(key::CALLED.into(), Value::Array(arr));
        }
        if let Some(approvals) = &f.approvals {
            let arr = approvals.iter().map(|a| Value::from(a.as_str())).collect();
            facts.insert(key::APPROVALS.into(), Value::Array(arr));
        }
        if let Some(principal) = &f.principal {
            facts.insert(key::PRINCIPAL.into(), principal.clone());
        }
        if let Some(prompt) = &f.prompt {
            facts.insert(key::PROMPT.into(), Value::from(prompt.as_str()));
        }
        if let Some(outputs) = &f.outputs {
            facts.insert(key::OUTPUTS.into(), outputs.clone());
        }
        if let Some(spent) = &f.spent {
            let m = spent
                .iter()
                .map(|(k, n)| (k.clone(), Value::from(*n)))
                .collect();
            facts.insert(key::SPENT.into(), Value::Object(m));
        }
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|c| {
                object([
                    (key::ID, Value::from(c.id.clone())),
                    (key::TOOL, Value::from(c.tool.clone())),
                    (key::ARGS, c.args.clone()),
                ])
            })
            .collect();
        let mut top = Map::new();
        top.insert(key::FACTS.into(), Value::Object(facts));
        top.insert(key::CALLS.into(), Value::Array(calls));
        for (k, v) in [
            (key::POLICY, &self.policy),
            (key::SESSION, &self.session),
            (key::TURN, &self.turn),
        ] {
            if let Some(v) = v {
                top.insert(k.into(), Value::from(v.clone()));
            }
        }
        Value::Object(top)
    }
}

/// A JSON object of these entries.
fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}
