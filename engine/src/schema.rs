//! The wire schema: every key a request, its facts or an offer request carries, named once.
//!
//! The strict reader ([`crate::Request::from_json`]), the one-pass reader behind
//! [`crate::Policy::decide_json`], the offer reader and the compiler's reserved fact names
//! all match on these constants, so a key renamed or added here is renamed or added
//! everywhere. Matching a `&str` against a constant pattern compiles exactly like matching
//! it against the literal, so the one-pass reader pays nothing for the indirection.

/// The request's facts object.
pub const FACTS: &str = "facts";
/// The request's batch of calls.
pub const CALLS: &str = "calls";
/// The policy module a request or offer request is meant for.
pub const POLICY: &str = "policy";
/// The executor's session id.
pub const SESSION: &str = "session";
/// The executor's user-turn id.
pub const TURN: &str = "turn";
/// An offer request's tool definitions.
pub const TOOLS: &str = "tools";

/// The top-level keys of a decision request.
pub const REQUEST_KEYS: [&str; 5] = [FACTS, CALLS, POLICY, SESSION, TURN];
/// The top-level keys of an offer request.
pub const OFFER_KEYS: [&str; 5] = [FACTS, TOOLS, POLICY, SESSION, TURN];

/// The standard fact: the active stage.
pub const STAGE: &str = "stage";
/// The standard fact: how many turns the active stage has used.
pub const STAGE_TURNS: &str = "stage_turns";
/// The standard fact: latch state carried from earlier batches of the same user turn.
pub const LATCHED: &str = "latched";
/// The standard fact: the conversation, oldest first.
pub const MESSAGES: &str = "messages";
/// The standard fact: filled-in fields.
pub const FIELDS: &str = "fields";
/// The standard fact: earlier tool calls and whether they succeeded.
pub const CALLED: &str = "called";

/// Every standard fact key; any other key of `facts` is a custom fact.
pub const STANDARD_FACTS: [&str; 6] = [STAGE, STAGE_TURNS, LATCHED, MESSAGES, FIELDS, CALLED];

/// A message's author (`client` for the customer).
pub const FROM: &str = "from";
/// A message's attached media kinds.
pub const MEDIA: &str = "media";
/// The tool of a call or of an earlier call.
pub const TOOL: &str = "tool";
/// Whether an earlier call succeeded.
pub const OK: &str = "ok";
/// How many user turns ago an earlier call ran: 0 is the current turn.
pub const TURNS_AGO: &str = "turns_ago";
/// A call's id, echoed in its decision.
pub const ID: &str = "id";
/// A call's arguments.
pub const ARGS: &str = "args";
