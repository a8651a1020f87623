// Type declarations for `toolgate`, the policy engine in-process.
//
// The wire types (a decision request, its facts and calls, a response and its decisions) are
// generated from the engine's Rust types into `wire.d.ts` and re-exported here, so they cannot
// drift from what the engine reads and writes. Everything below is the package's own API.

import type { Call, DecideRequest, Decision, Facts, Json, LatchState, Response } from './wire';
export * from './wire';

/** A tool definition as the executor sends it to the model. */
export interface ToolDef {
  name: string;
  description?: string;
  input_schema?: { [key: string]: Json };
  [extra: string]: Json | undefined;
}

/** An offer request: the same shape as the body of `POST /v1/offer`. */
export interface OfferRequest {
  facts?: Facts;
  tools: ToolDef[];
  policy?: string;
  session?: string;
  turn?: string;
}

export interface Offer {
  policy: string;
  revision: string;
  stage?: string;
  /** The definitions to show the model this turn. */
  tools: ToolDef[];
  disabled: { name: string; latch: string }[];
  /** For the executor's logs; never show this to the model. */
  withheld: { name: string; reason: string; detail: string }[];
}

/** One call's decision and every check the judge ran for it, in order. */
export interface CallExplanation {
  decision: Decision;
  steps: { check: string; passed: boolean; detail: string }[];
}

/** One diagnostic of a policy. */
export interface DiagnosticInfo {
  severity: 'error' | 'warning';
  message: string;
  file: string;
  line: number;
  column: number;
  /** The text printed beside the caret, when there is one. */
  label?: string;
  /** What to do about it, when there is a hint. */
  help?: string;
}

/** A compiled policy: read-only, shareable, every method a pure function of its argument. */
export declare class Policy {
  private constructor();
  /** The policy's module name. */
  readonly name: string;
  /** The content hash of the policy source (imports included). */
  readonly revision: string;
  /** The warnings it compiled with. */
  readonly warnings: DiagnosticInfo[];
  /**
   * How long a person's approval of one of its asks may be used once given, in ms: the
   * policy's `approvals { valid_for .. }`, ten minutes (600000) when it sets none. The engine
   * reads no clock; a `Turn` drops an approval older than this before judging.
   */
  readonly approvalWindowMs: number;
  /** Whether some latch or rule of the policy can ask a person (`asks`, `ask when`). */
  readonly mayAsk: boolean;
  /**
   * Judges a batch, given as an object or as JSON text (a key given twice in the text is
   * refused). Throws RequestError only for a request that cannot be judged.
   */
  decide(request: DecideRequest | string): Response;
  /** The tool definitions to show the model for these facts. */
  offer(request: OfferRequest | string): Offer;
  /** Why each call is decided as it is. For people and logs, not for the hot path. */
  explain(request: DecideRequest | string): CallExplanation[];
  /** `decide`, answering the response as JSON text (as the decision server writes it). */
  decideText(request: DecideRequest | string): string;
  /** `offer`, answering JSON text. */
  offerText(request: OfferRequest | string): string;
  /** `explain`, answering JSON text. */
  explainText(request: DecideRequest | string): string;
}

/** Compiles policy text (`filename` names it in diagnostics); `use stdlib::NAME` imports only. */
export declare function compile(source: string, filename?: string): Policy;
/** Reads and compiles a policy file; `use "FILE"` resolves relative to it. */
export declare function load(path: string): Policy;

/** A policy that does not compile. `message` is the rendered `file:line:col` text with carets. */
export declare class CompileError extends Error {
  readonly name: 'CompileError';
  readonly diagnostics: DiagnosticInfo[];
}

/** A request that cannot be judged. */
export declare class RequestError extends Error {
  readonly name: 'RequestError';
  /** The field at fault, e.g. `calls[0].tool`; null when the text itself is not JSON. */
  readonly field: string | null;
}

/**
 * A turn that cannot be judged: the policy no longer declares a latch set in it (a reload, a
 * policy swapped mid-turn), the session holds the most latched turns one session may, or one
 * turn came under too many ids. Every call of it is denied until the user's next message.
 */
export declare class TurnError extends Error {
  constructor(message: string, kind?: TurnErrorKind);
  readonly name: 'TurnError';
  readonly kind: TurnErrorKind | null;
}

export type TurnErrorKind = 'policy_changed' | 'too_many_turns' | 'too_many_ids';

/** A `facts.called` entry: a call that ran, and how many turns ago (absent: unknown). */
export interface CalledEntry {
  tool: string;
  ok: boolean;
  turns_ago?: number;
}

/**
 * The turn state of one session: the Rust turn model every toolgate surface shares
 * (`toolgate-turns`). Its recent turns are known by their ids, each with its own latches; an
 * id never seen starts a turn, a known one goes back to its own turn whatever came after it,
 * and a latched turn pushed out of the 16 kept is judged with every latch set.
 */
export declare class TurnState {
  /** A session with no turn signalled yet. */
  constructor();
  /**
   * The explicit new-turn signal (a user message), with the turn's id when there is one. A
   * signal of a known id changes nothing. Throws TurnError when the session is full.
   */
  signal(policy: Policy, id?: string): void;
  /**
   * Judges a batch as a call of turn `turn` (default: the request's `turn`, else the current
   * turn), with the turn's latches ORed into `facts.latched` and the session's recorded calls
   * after `facts.called`, and records the latches the judgement set. With `batch` (the id of
   * the model message) the verdicts are kept for `decision` (judged again, the kept response
   * is answered, and counted once). A budget over batches is judged with the counts the turn
   * state keeps: `per turn` and `per session` in this session, `per principal` and
   * `per tenant` (by `facts.principal`'s `sub` and `tenant`) in a book every TurnState of the
   * process shares; the response's `spent` is added to them. Counts are per process and
   * start from zero when it starts. `{ spend: false }` is for a judgement no call runs on (a
   * pre-scan, a preview): judged with the counts, it adds nothing, and its allowing verdicts
   * are not kept for `decision`. Throws RequestError for a request that cannot be read, or
   * that brings its own `facts.spent` (the state is unchanged), TurnError for a turn that
   * cannot be judged.
   */
  judge(policy: Policy, request: DecideRequest | string, turn?: string, batch?: string, options?: { spend?: boolean }): Response;
  /** `judge`, answering the response as JSON text. */
  judgeText(policy: Policy, request: DecideRequest | string, turn?: string, batch?: string, options?: { spend?: boolean }): string;
  /**
   * The decision the batch `batch` (default: the one judged last) kept for this very call
   * (same turn, call id, tool, arguments, read strictly from text, and policy revision), once,
   * while no latch changed since; else null: judge the call alone.
   */
  decision(
    policy: Policy, callId: string, tool: string, args: { [key: string]: Json } | string,
    turn?: string, batch?: string,
  ): Decision | null;
  /**
   * Records that `tool` ran (`ok`: it succeeded) in turn `turn` (default: the current one).
   * A call of a turn the session does not know is kept undated; recording never starts a turn.
   */
  recordCall(tool: string, ok: boolean, turn?: string): void;
  /**
   * Records the output of call `callId` of `tool` in turn `turn` (default: the current one),
   * for the `facts.outputs` of the turn's later batches (`from ingest`, a latch's `blocks
   * tainted`). A string is a string output. Until every allowed call whose output the policy
   * reads as untrusted has its output recorded, the turn's outputs are not sent, and a check
   * that reads them denies. Throws TypeError for an output that is not JSON data.
   */
  recordOutput(policy: Policy, callId: string, tool: string, output: Json, turn?: string): void;
  /**
   * Keeps the user's message of turn `turn` (default: the current one), sent as
   * `facts.prompt` with the turn's later batches (`from prompt`), only if `turn` is the
   * session's current turn; answers whether it was kept. A late message of an earlier turn,
   * or of an id the session does not know, is refused. Never starts a turn.
   */
  setPrompt(prompt: string, turn?: string): boolean;
  /** The latches a call of `turn` would be judged with now, in a response's shape. */
  latches(policy: Policy, turn?: string): LatchState;
  /** The calls recorded in `turn` (default: the current one), undated. */
  recorded(policy: Policy, turn?: string): { tool: string; ok: boolean }[];
  /** The current turn's latches as stored. */
  readonly latched: LatchState;
  /** The number of the most recent turn (0 before any signal). */
  readonly turns: number;
  /** The recorded calls, oldest first, dated against the current turn. */
  readonly called: CalledEntry[];
}

/** Where a `Turn` belongs: its session and its id there. */
export interface TurnOptions {
  /** The session (default: a session of its own). */
  state?: TurnState;
  /** The turn's id in the session: the framework's turn id (default: a new one). */
  id?: string;
  /**
   * The monotonic clock approvals are timed by, in milliseconds (default
   * `performance.now`). Tests inject their own to expire an approval.
   */
  clock?: () => number;
  /**
   * The user's message that started the turn, sent as `facts.prompt` (`from prompt`). Kept
   * only when this Turn's id starts a new turn: a known id's Turn leaves the prompt as it is.
   */
  prompt?: string;
}

/**
 * One user turn of a session (`TurnState`): judge its calls through it, record what ran, and
 * keep the approvals a person gave for its asks.
 * `new Turn(policy, facts)` is a session of its own (a new user message: no latch);
 * `new Turn(policy, facts, { state, id })` is turn `id` of `state`, latches and all when the
 * session knows the id.
 */
export declare class Turn {
  constructor(policy: Policy, facts?: Facts, options?: TurnOptions);
  readonly policy: Policy;
  readonly state: TurnState;
  readonly id: string;
  /** The turn's latches so far; read-only (only a new turn starts clear). */
  readonly latched: LatchState;
  /** The calls passed in and recorded in this turn, this turn's undated. */
  readonly called: CalledEntry[];
  /** The facts a request of this turn carries now (the session's calls dated). */
  currentFacts(): Facts;
  /**
   * Judges the calls together and records their latches; `batch` keeps the verdicts. The
   * live approvals go in `facts.approvals`; one a decision allowed a call with is used up,
   * and what the allowed calls consume is added to the budget counts, unless `spend` is
   * false (a judgement no call runs on; the call that runs is judged again, and counted).
   */
  decide(calls: Call[], options?: { batch?: string; spend?: boolean }): Decision[];
  /**
   * Records a person's approval of the call whose ask carried `digest` (the decision's
   * `approval`), timed by the Turn's clock: the next judgement of exactly that call allows
   * it, once, while the approval is younger than `policy.approvalWindowMs`. A new turn (or a
   * Turn made again for the same id) starts with none. Throws TypeError for a non-digest.
   */
  approve(digest: string): void;
  /** Withdraws an approval before it is used; true when there was one. */
  reject(digest: string): boolean;
  /** The live approvals (given, unused, younger than the window), oldest first. */
  readonly approvals: string[];
  /** Judges one call with the turn's state so far. */
  decideOne(call: Call): Decision;
  /** The verdict the model message `batch` (default: the last) kept for this very call, once; else null. */
  batchDecision(callId: string | undefined, tool: string, args: { [key: string]: Json } | string, batch?: string): Decision | null;
  /**
   * Records a dispatched call's outcome, dated by this turn however late it comes; with
   * `callId` and `output`, the tool's answer for the turn's later provenance checks.
   */
  record(tool: string, ok: boolean, result?: { callId: string; output: Json }): void;
  /** `facts.called` for an executor that carries history itself: every entry one turn older. */
  history(): CalledEntry[];
  /** The session's next user turn. */
  next(facts?: Facts, id?: string): Turn;
}
