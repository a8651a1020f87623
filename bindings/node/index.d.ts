// Type declarations for `toolgate`, the policy engine in-process.

/** Arguments or facts: JSON data. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** One tool call the model asked for. */
export interface Call {
  /** The executor's id for the call, echoed in its decision. */
  id: string;
  tool: string;
  args: { [key: string]: Json };
}

/** A decision request: the same shape as the body of `POST /v1/decide`. */
export interface DecideRequest {
  facts?: Facts;
  calls: Call[];
  /** The policy module the request is meant for; refused when it is another. */
  policy?: string;
  session?: string;
  turn?: string;
}

/** The session facts the executor supplies; see docs/integration.md. */
export interface Facts {
  stage?: string;
  stage_turns?: number;
  /** The latch state a previous batch of this user turn answered. */
  latched?: LatchState;
  /**
   * The conversation, oldest first; `text` is never read. Like every object of a request but
   * `facts` itself, a message and a `called` entry are closed: another key is a `RequestError`.
   */
  messages?: { from: string; media?: string[]; text?: Json }[];
  fields?: { [name: string]: Json };
  called?: { tool: string; ok: boolean; turns_ago?: number }[];
  [custom: string]: Json | undefined;
}

/** One flag for policies with at most one latch, else one flag per latch name. */
export type LatchState = boolean | { [latch: string]: boolean };

export type DenyKind =
  | 'unclassified' | 'stage' | 'latch' | 'host' | 'args' | 'precondition' | 'rule';

/** The decision for one call. A denial is a result, never an exception. */
export interface Decision {
  id: string;
  tool: string;
  allow: boolean;
  kind?: DenyKind;
  rule?: string;
  /** The refusal the model reads. */
  reason?: string;
  fail_open?: boolean;
  detokenise?: string[];
  opaque_tokens?: string[];
  sanitise_output?: boolean;
}

/** The answer to a batch: the same shape as the decision server's JSON response. */
export interface Response {
  policy: string;
  revision: string;
  /** Pass it back as `facts.latched` on the next batch of the same user turn. */
  latched: LatchState;
  decisions: Decision[];
}

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

/** The state of one user turn: create one per user message, judge its calls through it. */
export declare class Turn {
  constructor(policy: Policy, facts?: Facts);
  readonly policy: Policy;
  latched: LatchState;
  called: { tool: string; ok: boolean; turns_ago?: number }[];
  /** Decisions made so far, by call id. */
  readonly decisions: Map<string, Decision>;
  /** The facts a request of this turn carries now (this turn's calls dated `turns_ago: 0`). */
  currentFacts(): Facts;
  /** Judges the calls together, carrying the latch state forward. */
  decide(calls: Call[]): Decision[];
  /** Judges one call with the turn's state so far. */
  decideOne(call: Call): Decision;
  /** Records a dispatched call's outcome; this turn's requests date it `turns_ago: 0`. */
  record(tool: string, ok: boolean): void;
  /** `facts.called` for the next user turn: every entry one turn older. */
  history(): { tool: string; ok: boolean; turns_ago?: number }[];
}
