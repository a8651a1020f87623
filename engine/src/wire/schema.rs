//! The wire schema: every key a request, its facts or an offer request carries, named once.
//!
//! The strict reader ([`crate::Request::from_json`]), the one-pass reader behind
//! [`crate::Policy::decide_json`], the offer reader and the compiler's reserved fact names
//! all match on these constants, so a key renamed or added here is renamed or added
//! everywhere. Matching a `&str` against a constant pattern compiles exactly like matching
//! it against the literal, so the one-pass reader pays nothing for the indirection.
//!
//! Every object of a request is closed: the request itself ([`REQUEST_KEYS`]), an offer
//! request ([`OFFER_KEYS`]), each call ([`CALL_KEYS`]), each message ([`MESSAGE_KEYS`]) and
//! each `called` entry ([`CALLED_KEYS`]). Any other key makes the request malformed, with a
//! did-you-mean from the `*_ALIASES` tables (the names executors copy from model APIs) or
//! from the edit-distance rule. The reason: an ignored key is read as an absent one, so a
//! call sent with OpenAI's `arguments` was judged with no arguments at all, and a rule such
//! as `require not args.bcc exists` allowed it. What stays open, by design: the keys of
//! `facts` (any key that is not a standard fact is a custom fact, [`STANDARD_FACTS`], unless
//! no rule reads it and it is named like a standard fact, [`near_standard_fact`]), and the
//! contents of `args`, `fields` and custom facts, which are the executor's own data; a
//! `latched` object's keys are latch names, checked against the policy
//! ([`crate::Policy::check_request`]). Tool definitions in an offer request keep the
//! executor's own shape and pass unknown keys through.

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
/// The standard fact: approval digests a person granted (each turns exactly the call it was
/// asked for into an allow).
pub const APPROVALS: &str = "approvals";

/// The standard fact: who the agent acts for, read by rules as `principal.sub`,
/// `principal.tenant` and `principal.claims.NAME`.
pub const PRINCIPAL: &str = "principal";

/// The standard fact: per budget that counts across batches, what its scope has consumed
/// so far in its window. Supplied by whoever keeps the counts (the decision server).
pub const SPENT: &str = "spent";

/// The standard fact: the user's message of this turn, which `from prompt` reads and which
/// vouches for a value also seen in untrusted output.
pub const PROMPT: &str = "prompt";

/// The standard fact: the outputs of this turn's earlier calls, each `{id, tool, output}`
/// ([`OUTPUT_KEYS`]), which `from ingest`, `mentions ingest` and `blocks tainted` read.
pub const OUTPUTS: &str = "outputs";
/// An output entry's result, any JSON.
pub const OUTPUT: &str = "output";

/// Every standard fact key; any other key of `facts` is a custom fact.
pub const STANDARD_FACTS: [&str; 11] = [
    STAGE,
    STAGE_TURNS,
    LATCHED,
    MESSAGES,
    FIELDS,
    CALLED,
    APPROVALS,
    PRINCIPAL,
    SPENT,
    PROMPT,
    OUTPUTS,
];

/// A principal's subject.
pub const SUB: &str = "sub";
/// A principal's tenant.
pub const TENANT: &str = "tenant";
/// A principal's other claims, any JSON.
pub const CLAIMS: &str = "claims";
/// The keys of `facts.principal`.
pub const PRINCIPAL_KEYS: [&str; 3] = [SUB, TENANT, CLAIMS];

/// The standard fact a `facts` key is most likely a misspelling of: a case-insensitive
/// equal, one edit away (an insert, delete, substitution or swap of adjacent characters), or
/// cut short to at least four characters (`latch`, `message`). Stricter than
/// `toolgate_lang::did_you_mean` (two edits for a name this long), since a custom fact is
/// the executor's own name. One edit still catches a real name (`caller`): refused only
/// while no rule reads it, loudly, where `called` misspelt would be read as absent and let
/// every `called_before` through under `on_missing allow`. Computed on the stack: the one-pass reader asks it of every custom
/// fact it skips, and allocates nothing for that. A custom fact no rule reads
/// under such a name is refused ([`crate::Policy::check_facts`]): sent as `facts.latch`,
/// the executor's latch state would be read as absent.
pub fn near_standard_fact(key: &str) -> Option<&'static str> {
    let limit = 1;
    STANDARD_FACTS
        .into_iter()
        .filter(|s| *s != key)
        .filter_map(|s| {
            let cut_short = key.len() >= 4
                && s.len() > key.len()
                && s.as_bytes()[..key.len()].eq_ignore_ascii_case(key.as_bytes());
            let d = if s.eq_ignore_ascii_case(key) || cut_short {
                0
            } else {
                toolgate_lang::edit_distance_within(key.as_bytes(), s.as_bytes(), limit)?
            };
            (d <= limit).then_some((d, s))
        })
        .min()
        .map(|(_, s)| s)
}

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
/// The keys of each `facts.outputs` entry.
pub const OUTPUT_KEYS: [&str; 3] = [ID, TOOL, OUTPUT];
/// A message's text: accepted so an executor can send its transcript as it is, never read.
pub const TEXT: &str = "text";

/// The keys of a call object.
pub const CALL_KEYS: [&str; 3] = [ID, TOOL, ARGS];
/// The keys of a message (an entry of `facts.messages`).
pub const MESSAGE_KEYS: [&str; 3] = [FROM, MEDIA, TEXT];
/// The keys of an earlier call (an entry of `facts.called`).
pub const CALLED_KEYS: [&str; 3] = [TOOL, OK, TURNS_AGO];

/// Names a model API or agent SDK gives a call's parts (OpenAI's `arguments` and `name`,
/// Anthropic's `input`, MCP's `params`, hook payloads' `tool_input`), each with the key a
/// call has here: the did-you-mean for a call copied as the model wrote it.
pub const CALL_ALIASES: [(&str, &str); 12] = [
    ("arguments", ARGS),
    ("input", ARGS),
    ("parameters", ARGS),
    ("params", ARGS),
    ("tool_input", ARGS),
    ("name", TOOL),
    ("function", TOOL),
    ("tool_name", TOOL),
    ("call_id", ID),
    ("tool_call_id", ID),
    ("tool_use_id", ID),
    ("toolCallId", ID),
];
/// Names chat APIs give a message's parts (`role`, `content`), with the key a message has
/// here.
pub const MESSAGE_ALIASES: [(&str, &str); 4] = [
    ("role", FROM),
    ("author", FROM),
    ("content", TEXT),
    ("attachments", MEDIA),
];
/// Names an executor may give an earlier call's parts, with the key a `called` entry has here.
pub const CALLED_ALIASES: [(&str, &str); 4] = [
    ("name", TOOL),
    ("tool_name", TOOL),
    ("success", OK),
    ("succeeded", OK),
];
/// Names for a request's parts at its top level, with the key meant: OpenAI's `tool_calls`
/// are the batch.
pub const REQUEST_ALIASES: [(&str, &str); 1] = [("tool_calls", CALLS)];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_standard_fact_is_named_and_a_custom_one_is_not() {
        for (key, meant) in [
            ("latch", "latched"),
            ("message", "messages"),
            ("Latched", "latched"),
            ("LATCHED", "latched"),
            ("mesages", "messages"),
            ("messsages", "messages"),
            ("stgae", "stage"),
            ("stage_turn", "stage_turns"),
            ("feilds", "fields"),
            ("caled", "called"),
            ("caller", "called"),
        ] {
            assert_eq!(near_standard_fact(key), Some(meant), "{key}");
            // Where the edit distance decides, the same answer as every other did-you-mean.
            if !meant.starts_with(key) {
                assert_eq!(
                    toolgate_lang::did_you_mean(key, STANDARD_FACTS),
                    Some(meant),
                    "{key}"
                );
            }
        }
        for key in [
            "latched",
            "user_tier",
            "role",
            "account_id",
            "x",
            "",
            "budget",
            "sta",
            "calls_made",
            "callers",
        ] {
            assert_eq!(near_standard_fact(key), None, "{key}");
        }
    }
}
