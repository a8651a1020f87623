"""The wire types of toolgate: a decision request and its response, as the dicts
``Policy.decide`` takes and returns. A stub only (no module at run time): import it under
``typing.TYPE_CHECKING``.

Generated from the engine's Rust types (docs/wire/*.schema.json); do not edit.
Regenerate: TOOLGATE_BLESS=1 cargo test -p toolgate-tests --test it wire_schema::
"""

from typing import Any, Dict, List, Literal, Optional, Union

from typing_extensions import NotRequired, TypedDict


ApprovalDigest = str
"""An ask's `approval` digest: `ap1:` and 64 lowercase hex digits. In `facts.approvals` it
allows exactly the call that asked for it."""


Call = TypedDict(
    "Call",
    {
        # The arguments, a JSON object; absent is `{}`. Never JSON text: decode it first.
        "args": NotRequired[Optional[Dict[str, Any]]],
        # The executor's id for the call, echoed in the decision.
        "id": str,
        # The tool name.
        "tool": str,
    },
)
"""One tool call the model asked for."""


CalledTool = TypedDict(
    "CalledTool",
    {
        # Whether it succeeded; absent counts as false.
        "ok": NotRequired[Optional[bool]],
        # The tool called.
        "tool": str,
        # How many user turns ago it ran (0: the current turn), when the executor knows.
        # `called_within` needs it; a call without it never counts as recent.
        "turns_ago": NotRequired[Optional[int]],
    },
)
"""An earlier call and its outcome."""


Count = float
"""What a budget over batches consumed: a number of at least 0."""


Decision = TypedDict(
    "Decision",
    {
        # Whether the executor may dispatch the call.
        "allow": bool,
        # On an ask (kind `ask`): the digest a person's approval must carry (in `facts.approvals`)
        # to let exactly this call run. On an allow: the approval it used.
        "approval": NotRequired[str],
        # Argument paths carrying vault tokens the executor may unwrap for this call (allowed
        # calls of policies that declare `detokenise`).
        "detokenise": NotRequired[List[str]],
        # True when the call was allowed only because a rule's facts were absent and the rule
        # fails open.
        "fail_open": NotRequired[bool],
        # The call's id, echoed.
        "id": str,
        # Why it was denied; absent when allowed.
        "kind": NotRequired[DenyKind],
        # Argument paths carrying vault tokens that must reach the tool still wrapped.
        "opaque_tokens": NotRequired[List[str]],
        # On a `provenance` denial: the argument value that came from untrusted output, and where
        # it was seen.
        "provenance": NotRequired[Provenance],
        # The refusal the model reads; absent when allowed.
        "reason": NotRequired[str],
        # The name of the policy element that denied it; absent when allowed.
        "rule": NotRequired[str],
        # True when the tool's output must be re-sanitised before the model sees it (ingest tools,
        # and tools named by `sanitise_output`). Set on allowed calls only.
        "sanitise_output": NotRequired[bool],
        # The rules marked `shadow` that would have denied this call, had they not been shadow
        # (listed for calls that are allowed or ask; absent from JSON when none).
        "shadow_denials": NotRequired[List[str]],
        # The call's tool, echoed.
        "tool": str,
    },
)
"""The decision for one call."""


DenyKind = Literal[
    # The policy never classified the tool.
    "unclassified",
    # The tool does not exist in the active stage, the stage is unknown, or it ran out of turns.
    "stage",
    # A capability latch is set for this turn and blocks the tool.
    "latch",
    # A URL argument's host is not on the allowlist.
    "host",
    # An argument constraint failed.
    "args",
    # A built-in fact precondition failed.
    "precondition",
    # A rule mixing arguments and custom facts failed.
    "rule",
    # The server's shared session state could not be read or written, so a tool that a latch can
    # block, or that sets one, is denied rather than judged without it. The engine never gives
    # this kind itself: a server that keeps turn state does (`toolgate serve --state`).
    "state",
    # A budget (`budget NAME for TOOLS { .. }`) has too little left for the call, or the amount it
    # would consume is not a number of at least 0. The refusal says what is left.
    "budget",
    # An argument value came from content a third party wrote this turn (`from ingest`, `mentions
    # ingest`, a latch's `blocks tainted`), or where it came from cannot be checked. The
    # decision's `provenance` says which argument and where it was seen.
    "provenance",
    # Not a refusal: the call needs a person's approval first (`ask when`, a latch's `asks`). The
    # decision's `approval` is the digest an approval must carry. An executor that does not know
    # asks treats this like any denial, so asking fails closed.
    "ask",
]
"""Why a call was denied. Non-exhaustive: a later version may add a kind, and a kind an
executor does not know is a denial like any other."""


Facts = TypedDict(
    "Facts",
    {
        # Approvals a person granted: the `approval` digests of asks (see `docs/language.md`,
        # "Asking a person"). Each turns exactly the call it was asked for into an allow.
        "approvals": NotRequired[Optional[List[ApprovalDigest]]],
        # Earlier tool calls in this conversation and whether they succeeded.
        "called": NotRequired[Optional[List[CalledTool]]],
        # Filled-in fields (a CRM lead, a claim form).
        "fields": NotRequired[Optional[Dict[str, Any]]],
        # Latch state carried from earlier batches of the same user turn.
        "latched": NotRequired[Optional[LatchState]],
        # The conversation, oldest first; absent when the executor could not read it.
        "messages": NotRequired[Optional[List[Message]]],
        # The outputs of this turn's earlier calls (`facts.outputs`): a list of `{id, tool,
        # output}` objects, checked to have that shape, which `from ingest`, `mentions ingest` and
        # `blocks tainted` read. Absent, such a test is unknown and denies.
        "outputs": NotRequired[Optional[List[Output]]],
        # Who the agent acts for: an object with `sub`, `tenant` and `claims`, each optional
        # (`principal_value` builds one). Rules read it as `principal.sub`, `principal.tenant`,
        # `principal.claims.NAME`.
        "principal": NotRequired[Optional[Principal]],
        # The user's message of this turn (`facts.prompt`): a value in it is the user's own, for
        # `from prompt` and to vouch for a value also seen in untrusted output.
        "prompt": NotRequired[Optional[str]],
        # Per budget that counts across batches (`per turn`, `session`, `principal`, `tenant`):
        # what its scope has consumed so far in its window. Whoever keeps the counts supplies it;
        # a budget whose count is missing denies, since its state is unknown.
        "spent": NotRequired[Optional[Dict[str, Count]]],
        # The active stage of the conversation.
        "stage": NotRequired[Optional[str]],
        # How many turns the active stage has used; absent counts as 0.
        "stage_turns": NotRequired[Optional[int]],
    },
)
"""The facts the executor supplies. Every field is optional. Any other key is the executor's
own data (a TypedDict cannot say so)."""


LatchState = Union[bool, Dict[str, bool]]
"""Latch state, owned: the `latched` fact of a request and the `latched` of a response
(`LatchState` is this type). One flag, or one flag per named latch."""


Message = TypedDict(
    "Message",
    {
        # Who wrote it: `client` for the customer, anything else for others.
        "from": str,
        # Kinds of media attached (`image`, `document`, ...); case-sensitive.
        "media": NotRequired[Optional[List[str]]],
        # The message's text: accepted so a transcript can be sent as it is, never read.
        "text": NotRequired[Any],
    },
)
"""One message of the conversation."""


Output = TypedDict(
    "Output",
    {
        # The call's id.
        "id": str,
        # What it returned, any JSON.
        "output": Any,
        # The call's tool.
        "tool": str,
    },
)
"""The output of an earlier call of this turn, for `from ingest`, `mentions ingest` and `blocks
tainted`."""


Principal = TypedDict(
    "Principal",
    {
        # Any other claims, as JSON.
        "claims": NotRequired[Dict[str, Any]],
        # The subject: a string with a visible character.
        "sub": NotRequired[str],
        # The tenant: a string with a visible character.
        "tenant": NotRequired[str],
    },
)
"""Who the agent acts for. Rules read it as `principal.sub`, `principal.tenant` and
`principal.claims.NAME`; a part that is absent is unknown, so a rule that needs it denies."""


Provenance = TypedDict(
    "Provenance",
    {
        # The argument, as a path: `args.recipient`, `args.participants[2]`.
        "arg": str,
        # The id of the call whose output it was first seen in.
        "call": NotRequired[str],
        # Where in the request it was seen: `facts.outputs[1].output.body`.
        "output": NotRequired[str],
        # That call's tool.
        "tool": NotRequired[str],
        # Why the value counts as untrusted.
        "why": ProvenanceWhy,
    },
)
"""Where a denied argument's value came from (kind `provenance`)."""


ProvenanceWhy = Literal[
    # It occurs in an untrusted output, and not in the prompt or trusted output.
    "untrusted",
    # The turn's outputs exceed `MAX_INDEXED_BYTES`: every value counts as untrusted.
    "over_cap",
    # The request carries no `facts.outputs`.
    "no_outputs",
]
"""Why a value counts as untrusted."""


DecideRequest = TypedDict(
    "DecideRequest",
    {
        # The calls the model asked for, in the model's order.
        "calls": List[Call],
        # What the executor knows about the conversation.
        "facts": NotRequired[Optional[Facts]],
        # The policy module the request is meant for, if the caller names one.
        "policy": NotRequired[Optional[str]],
        # The executor's session id (used by the decision server).
        "session": NotRequired[Optional[str]],
        # The executor's user-turn id (used by the decision server).
        "turn": NotRequired[Optional[str]],
    },
)
"""One batch of tool calls and the facts they are judged against."""


Response = TypedDict(
    "Response",
    {
        # One decision per call, in request order.
        "decisions": List[Decision],
        # Latch state after the batch; pass it back in on the next batch of the same user turn.
        "latched": LatchState,
        # The policy's module name.
        "policy": str,
        # The content hash of the policy source that judged the batch.
        "revision": str,
        # Per budget that counts across batches: what this batch's allowed calls consumed. Whoever
        # keeps the counts adds it to its book (and to the next `facts.spent`). Absent from JSON
        # when empty.
        "spent": NotRequired[Dict[str, Count]],
    },
)
"""The answer to one `Request`."""
