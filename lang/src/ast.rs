//! The syntax tree of a policy. Every node that a diagnostic may point at carries a [`Span`].

use crate::span::Span;

/// A name written in the source (module, tool, stage, latch, list or rule name).
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    /// The name, unquoted.
    pub name: String,
    /// Where it was written.
    pub span: Span,
}

/// A value with the span it was written at.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    /// The value.
    pub node: T,
    /// Where it was written.
    pub span: Span,
}

/// A whole policy file.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The `module NAME` at the top of the file.
    pub module: Ident,
    /// Declarations in source order.
    pub items: Vec<Item>,
}

/// One top-level declaration.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// `use stdlib::NAME` / `use "path.gate"`: brings in another module's declarations.
    Use(UseDecl),
    /// `write a, b` / `ingest c` / `read d`.
    Class(ClassDecl),
    /// `stage NAME { ... }`.
    Stage(StageDecl),
    /// `latch NAME { ... }`.
    Latch(LatchDecl),
    /// `hosts NAME { ... }`.
    Hosts(HostsDecl),
    /// `rule NAME for TOOLS { ... }`.
    Rule(RuleDecl),
    /// `invariant NAME { never allow ... }`: checked by `toolgate test`, never by decisions.
    Invariant(InvariantDecl),
    /// `detokenise TOOL { args [..] }`: arguments that may receive vault-token cleartext.
    Detokenise(DetokeniseDecl),
    /// `sanitise_output SELECTORS`: tools whose output must be re-sanitised (ingest always is).
    SanitiseOutput(SanitiseDecl),
    /// `approvals { valid_for DURATION }`: how long an ask's approval may be used.
    Approvals(ApprovalsDecl),
    /// `budget NAME for TOOLS { count|sum PATH <= N [within DURATION] per SCOPE }`.
    Budget(BudgetDecl),
    /// `provenance for TOOLS { metadata [KEY, ..] }`: how those tools' outputs are indexed.
    Provenance(ProvenanceDecl),
}

/// `provenance for [read_inbox] { metadata [sender, timestamp] }`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvenanceDecl {
    /// The tools (or classes) whose outputs this labels.
    pub targets: Vec<Selector>,
    /// Object keys whose values are metadata, set by the system rather than the text's author
    /// (ids, senders, timestamps): they are not indexed as untrusted content.
    pub metadata: Vec<Spanned<String>>,
    /// The whole declaration.
    pub span: Span,
}

/// `budget daily_refunds for refund { sum args.amount <= 500 within 24h per principal }`.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetDecl {
    /// The budget's name, reported in denials.
    pub name: Ident,
    /// The tools (or classes) whose calls it counts.
    pub targets: Vec<Selector>,
    /// The limit; `None` only after a syntax error was reported (the compiler refuses a
    /// budget without one).
    pub limit: Option<BudgetLimit>,
    /// The author's refusal text.
    pub refusal: Option<Spanned<String>>,
    /// The whole declaration.
    pub span: Span,
}

/// `sum args.amount <= 500 within 24h per principal`.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetLimit {
    /// What a call consumes.
    pub measure: BudgetMeasure,
    /// The most that may be consumed in one scope (and window).
    pub max: Spanned<f64>,
    /// `within DURATION`: a sliding window; none counts over the whole scope.
    pub within: Option<Spanned<Duration>>,
    /// `per SCOPE`: whose calls are counted together.
    pub per: Spanned<BudgetScope>,
    /// The whole limit.
    pub span: Span,
}

/// What a call consumes from a budget.
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetMeasure {
    /// `count`: one per allowed call.
    Count,
    /// `sum PATH`: the number at the path (an argument, usually).
    Sum(Path),
}

/// Whose calls a budget counts together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BudgetScope {
    /// The calls of one batch (needs no state).
    Batch,
    /// The batches of one user turn.
    Turn,
    /// The batches of one session.
    Session,
    /// Every session of one principal (`principal.sub`).
    Principal,
    /// Every session of one tenant (`principal.tenant`).
    Tenant,
}

impl BudgetScope {
    /// The scope as written.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetScope::Batch => "batch",
            BudgetScope::Turn => "turn",
            BudgetScope::Session => "session",
            BudgetScope::Principal => "principal",
            BudgetScope::Tenant => "tenant",
        }
    }
}

/// `approvals { valid_for 10m }`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalsDecl {
    /// `valid_for`: how long an approval may be used once a person gave it, as written.
    pub valid_for: Option<Spanned<Duration>>,
    /// The whole declaration.
    pub span: Span,
}

/// A duration as written: a count of seconds, minutes or hours (`30s`, `10m`, `24h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duration {
    /// The count as written.
    pub count: u64,
    /// The unit as written.
    pub unit: DurationUnit,
}

/// The unit of a [`Duration`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationUnit {
    /// `s`.
    Seconds,
    /// `m`.
    Minutes,
    /// `h`.
    Hours,
}

impl Duration {
    /// The duration in seconds, or `None` past `u64`.
    pub fn seconds(self) -> Option<u64> {
        self.count.checked_mul(match self.unit {
            DurationUnit::Seconds => 1,
            DurationUnit::Minutes => 60,
            DurationUnit::Hours => 3600,
        })
    }
}

impl std::fmt::Display for Duration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = match self.unit {
            DurationUnit::Seconds => "s",
            DurationUnit::Minutes => "m",
            DurationUnit::Hours => "h",
        };
        write!(f, "{}{unit}", self.count)
    }
}

/// `detokenise send_referral { args [args.nhs_number: NHS_NUMBER] }`.
#[derive(Debug, Clone, PartialEq)]
pub struct DetokeniseDecl {
    /// The tool whose arguments may be unwrapped.
    pub tool: Ident,
    /// The argument paths (each rooted at `args`) that may receive cleartext, each with the
    /// token kinds it accepts; a path also covers everything below it.
    pub paths: Vec<DetokenisePath>,
    /// The whole declaration.
    pub span: Span,
}

/// `args.sort_code: SORT_CODE`, `args.patient: [NAME, EMAIL]` or `args.letter: any`.
#[derive(Debug, Clone, PartialEq)]
pub struct DetokenisePath {
    /// The argument path.
    pub path: Path,
    /// The token kinds it accepts, as written after `:`; `None` when the author wrote none
    /// (a compile error: every path must say which kinds it unwraps).
    pub kinds: Option<Spanned<Vec<Spanned<TokenKind>>>>,
}

/// One accepted kind of vault token.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    /// `any`: every kind (for free text that legitimately carries several).
    Any,
    /// A kind: a token's name without its trailing `_NN` index (`SORT_CODE` for
    /// `<VAULT:SORT_CODE_01>`). Compared case-sensitively.
    Named(String),
}

/// `sanitise_output [lookup_patient, read]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SanitiseDecl {
    /// The tools or classes whose output must pass the executor's sanitiser.
    pub targets: Vec<Selector>,
    /// The whole declaration.
    pub span: Span,
}

/// The capability class of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolClass {
    /// Has a consequential side effect: a state change, an outbound message, a payment.
    Write,
    /// A write that communicates outward (email, webhook, chat message, HTTP post): the
    /// exfiltration leg of the lethal trifecta. The selector `write` matches these too.
    Egress,
    /// Returns third-party content the agent did not author.
    Ingest,
    /// Reads trusted data without side effects.
    Read,
}

impl ToolClass {
    /// The keyword for this class.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolClass::Write => "write",
            ToolClass::Egress => "egress",
            ToolClass::Ingest => "ingest",
            ToolClass::Read => "read",
        }
    }

    /// Parses a class keyword.
    pub fn from_keyword(word: &str) -> Option<Self> {
        match word {
            "write" => Some(ToolClass::Write),
            "egress" => Some(ToolClass::Egress),
            "ingest" => Some(ToolClass::Ingest),
            "read" => Some(ToolClass::Read),
            _ => None,
        }
    }

    /// Whether a tool of this class is selected by the class selector `selector`: each class
    /// selects itself, and `write` also selects `egress` (an outward write is still a write).
    pub fn selected_by(self, selector: ToolClass) -> bool {
        self == selector || (selector == ToolClass::Write && self == ToolClass::Egress)
    }
}

/// Where a `use` finds its module.
#[derive(Debug, Clone, PartialEq)]
pub enum UseSource {
    /// `stdlib::NAME`: a module of the standard library embedded in toolgate.
    Stdlib(Ident),
    /// `"path.gate"`: a file, resolved relative to the importing file by the caller.
    File(Spanned<String>),
}

/// `use SOURCE [::ITEM] [for TOOLS]`.
#[derive(Debug, Clone, PartialEq)]
pub struct UseDecl {
    /// The module imported.
    pub source: UseSource,
    /// `::NAME`: import only this declaration of the module.
    pub item: Option<Ident>,
    /// `for TOOLS`: the imported rules apply to these tools or classes instead of their own.
    pub retarget: Option<Vec<Selector>>,
    /// The whole declaration.
    pub span: Span,
}

impl UseDecl {
    /// The import as written, without `for`: `stdlib::x`, `stdlib::x::y`, `"a.gate"`.
    pub fn display(&self) -> String {
        let mut out = match &self.source {
            UseSource::Stdlib(n) => format!("stdlib::{}", n.name),
            UseSource::File(p) => format!("{:?}", p.node),
        };
        if let Some(item) = &self.item {
            out.push_str("::");
            out.push_str(&item.name);
        }
        out
    }
}

/// `write a, b`: classifies tools.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassDecl {
    /// The class given.
    pub class: Spanned<ToolClass>,
    /// The tools classified.
    pub tools: Vec<Ident>,
}

/// `stage NAME { tools [..] max_turns N require COND refusal ".." }`.
#[derive(Debug, Clone, PartialEq)]
pub struct StageDecl {
    /// The stage name.
    pub name: Ident,
    /// Tools that exist in this stage; empty when not given.
    pub tools: Vec<Ident>,
    /// Calls are denied once `stage_turns` exceeds this.
    pub max_turns: Option<Spanned<u64>>,
    /// Who may be in the stage: every `require` must hold (they read the principal and
    /// facts, never `args`), or each call of the stage is denied.
    pub requires: Vec<Expr>,
    /// The author's refusal text for stage denials.
    pub refusal: Option<Spanned<String>>,
    /// The whole declaration.
    pub span: Span,
}

/// What a latch selector names: a whole class or one tool.
#[derive(Debug, Clone, PartialEq)]
pub enum Selector {
    /// Every tool of a class.
    Class(Spanned<ToolClass>),
    /// One tool.
    Tool(Ident),
}

impl Selector {
    /// Where the selector was written.
    pub fn span(&self) -> Span {
        match self {
            Selector::Class(c) => c.span,
            Selector::Tool(t) => t.span,
        }
    }
}

/// `latch NAME { set_by .. blocks .. refusal ".." }`.
#[derive(Debug, Clone, PartialEq)]
pub struct LatchDecl {
    /// The latch name.
    pub name: Ident,
    /// Tools or classes whose presence in a batch sets the latch.
    pub set_by: Vec<Selector>,
    /// Tools or classes denied while the latch is set.
    pub blocks: Vec<Selector>,
    /// Tools or classes denied while the latch is set only when a value of their arguments
    /// comes from this turn's untrusted output (`blocks tainted`).
    pub blocks_tainted: Vec<Selector>,
    /// Tools or classes that ask a human instead of running while the latch is set (`asks`):
    /// an approval lets exactly that call through.
    pub asks: Vec<Selector>,
    /// The author's refusal text.
    pub refusal: Option<Spanned<String>>,
    /// The whole declaration.
    pub span: Span,
}

/// `hosts NAME { schemes [..] allow [..] }`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostsDecl {
    /// The list name.
    pub name: Ident,
    /// Accepted URL schemes.
    pub schemes: Vec<Spanned<String>>,
    /// Host entries: `example.com` exactly, `.example.com` any proper subdomain.
    pub entries: Vec<Spanned<String>>,
    /// Whether a `schemes` entry was written at all.
    pub schemes_given: bool,
    /// `userinfo allow|deny`: whether a URL may carry a user name (`user@host`).
    pub userinfo: Option<Spanned<bool>>,
    /// `idn allow|deny`: whether a URL's host may be an internationalised name.
    pub idn: Option<Spanned<bool>>,
    /// The whole declaration.
    pub span: Span,
}

/// What a rule does when the facts it reads are absent from the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMissing {
    /// Let the call through, marked `fail_open`.
    Allow,
    /// Deny the call.
    Deny,
}

/// `rule NAME for TOOLS { require EXPR ... refusal ".." on_missing allow|deny }`.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleDecl {
    /// The rule name, reported in denials.
    pub name: Ident,
    /// The tools (or classes) the rule applies to.
    pub targets: Vec<Selector>,
    /// Conditions that must all hold, in source order.
    pub requires: Vec<Expr>,
    /// `ask when` conditions, in source order: a call that passes every `require` and meets
    /// one of these asks a human instead of running.
    pub asks: Vec<Expr>,
    /// The author's refusal text.
    pub refusal: Option<Spanned<String>>,
    /// The failure mode when facts are absent.
    pub on_missing: Option<Spanned<OnMissing>>,
    /// `shadow`, where written: the rule is judged and its would-be denials reported, but
    /// it never denies.
    pub shadow: Option<Span>,
    /// The whole declaration.
    pub span: Span,
}

/// A condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// What the condition is.
    pub kind: ExprKind,
    /// Where it was written.
    pub span: Span,
}

/// The forms a condition can take.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// `true` or `false`.
    Bool(bool),
    /// `a and b and ...`.
    And(Vec<Expr>),
    /// `a or b or ...`.
    Or(Vec<Expr>),
    /// `not a`.
    Not(Box<Expr>),
    /// A built-in precondition such as `field_filled(phone)`.
    Call(Call),
    /// A test on an argument or fact: `args.amount <= 250`.
    Predicate(Path, Predicate),
}

/// Where a path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathRoot {
    /// The call's arguments.
    Args,
    /// The request's facts.
    Facts,
    /// Who the agent acts for (`principal.sub`, `principal.tenant`,
    /// `principal.claims.NAME`): `facts.principal`, which the executor supplies, or the
    /// server sets from a verified bearer token.
    Principal,
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment {
    /// `.key`
    Key(String),
    /// `[n]`
    Index(usize),
}

/// `args.a.b[0]` or `facts.x`.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    /// `args`, `facts` or `principal`.
    pub root: PathRoot,
    /// The steps after the root.
    pub segments: Vec<PathSegment>,
    /// Where it was written.
    pub span: Span,
}

impl Path {
    /// The path as written, e.g. `args.amount`.
    pub fn display(&self) -> String {
        let mut out = String::from(match self.root {
            PathRoot::Args => "args",
            PathRoot::Facts => "facts",
            PathRoot::Principal => "principal",
        });
        for seg in &self.segments {
            match seg {
                PathSegment::Key(k) => {
                    out.push('.');
                    out.push_str(k);
                }
                PathSegment::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
            }
        }
        out
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `>=`
    Ge,
    /// `>`
    Gt,
}

impl CmpOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Ge => ">=",
            CmpOp::Gt => ">",
        }
    }
}

/// A literal value in a condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// A number.
    Number(f64),
    /// A string.
    String(String),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
}

/// A JSON type name used with `is`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeName {
    /// `string`
    String,
    /// `number`
    Number,
    /// `integer`: a number with no fractional part.
    Integer,
    /// `bool`
    Bool,
    /// `array`
    Array,
    /// `object`
    Object,
    /// `null`
    Null,
}

impl TypeName {
    /// The name as written.
    pub fn as_str(self) -> &'static str {
        match self {
            TypeName::String => "string",
            TypeName::Number => "number",
            TypeName::Integer => "integer",
            TypeName::Bool => "bool",
            TypeName::Array => "array",
            TypeName::Object => "object",
            TypeName::Null => "null",
        }
    }
}

/// The test applied to a path.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    /// `<op> literal`
    Compare(CmpOp, Spanned<Literal>),
    /// `in hosts NAME`
    InHosts(Ident),
    /// `in [a, b, ..]`
    InList(Vec<Spanned<Literal>>),
    /// `matches "regex"`
    Matches(Spanned<String>),
    /// `is TYPE`
    Is(Spanned<TypeName>),
    /// `exists`
    Exists,
    /// `in facts.PATH`: the value is one of the fact's elements (every element, for a list).
    InFact(Path),
    /// `from SOURCE`: the value, or any element or leaf of it, occurs in that source.
    From(Spanned<Source>),
    /// `mentions SOURCE`: a URL, e-mail address, IBAN or long number inside the text occurs
    /// in that source.
    Mentions(Spanned<Source>),
}

/// Where a value may have come from, for `from` and `mentions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// This turn's untrusted output (`ingest` tools), unless the value also occurs in the
    /// prompt or in trusted (`read`) output.
    Ingest,
    /// The user's message of this turn (`facts.prompt`).
    Prompt,
}

impl Source {
    /// The keyword as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Ingest => "ingest",
            Source::Prompt => "prompt",
        }
    }
}

/// A call of a built-in function: `client_sent_media(within: 10, kinds: [image])`.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The function name.
    pub name: Ident,
    /// The arguments in source order.
    pub args: Vec<CallArg>,
}

/// One argument of a call, optionally labelled (`within: 10`).
#[derive(Debug, Clone, PartialEq)]
pub struct CallArg {
    /// The label, if written.
    pub label: Option<Ident>,
    /// The value.
    pub value: Spanned<CallValue>,
}

/// A value passed to a built-in.
#[derive(Debug, Clone, PartialEq)]
pub enum CallValue {
    /// A number.
    Number(f64),
    /// A string.
    String(String),
    /// A bare name.
    Name(String),
    /// `[a, b]`.
    List(Vec<Spanned<CallValue>>),
}

/// A separate invariants file: `invariants for MODULE`, host lists and invariants.
#[derive(Debug, Clone, PartialEq)]
pub struct InvariantsFile {
    /// The policy module the invariants apply to.
    pub policy: Ident,
    /// `hosts` and `invariant` declarations in source order.
    pub items: Vec<Item>,
}

/// `invariant NAME { never allow SELECTORS [when COND] [unless COND] }`.
#[derive(Debug, Clone, PartialEq)]
pub struct InvariantDecl {
    /// The invariant name, reported when it is violated.
    pub name: Ident,
    /// The calls the invariant is about.
    pub subjects: Vec<InvSelector>,
    /// The invariant only applies when this holds (absent: always).
    pub when: Option<InvExpr>,
    /// The invariant does not apply when this holds (absent: never excepted).
    pub unless: Option<InvExpr>,
    /// The whole declaration.
    pub span: Span,
}

/// What an invariant selector names.
#[derive(Debug, Clone, PartialEq)]
pub enum InvSelector {
    /// A class or a classified tool, as in rules and latches.
    Selector(Selector),
    /// Any tool the policy does not classify.
    Unclassified(Span),
    /// Every call.
    Any(Span),
}

impl InvSelector {
    /// Where the selector was written.
    pub fn span(&self) -> Span {
        match self {
            InvSelector::Selector(s) => s.span(),
            InvSelector::Unclassified(s) | InvSelector::Any(s) => *s,
        }
    }
}

/// A condition of an invariant: the rule condition language plus invariant-only atoms.
#[derive(Debug, Clone, PartialEq)]
pub struct InvExpr {
    /// What the condition is.
    pub kind: InvExprKind,
    /// Where it was written.
    pub span: Span,
}

/// The forms an invariant condition can take.
#[derive(Debug, Clone, PartialEq)]
pub enum InvExprKind {
    /// `a and b and ...`.
    And(Vec<InvExpr>),
    /// `a or b or ...`.
    Or(Vec<InvExpr>),
    /// `not a`.
    Not(Box<InvExpr>),
    /// A rule condition: `true`, a test on `args.`/`facts.`, a built-in precondition.
    Cond(Expr),
    /// `stage == NAME` (`negated: false`), `stage != NAME` (`negated: true`), `stage in [..]`.
    Stage {
        /// The stages named.
        stages: Vec<Ident>,
        /// True for `!=`.
        negated: bool,
    },
    /// `batch has SELECTOR`: another call of the same batch matches the selector.
    BatchHas(InvSelector),
    /// `latched`: the request's `latched` fact sets a latch.
    Latched,
    /// `fail_open`: the decision allowed the call only because a rule failed open.
    FailOpen,
}
