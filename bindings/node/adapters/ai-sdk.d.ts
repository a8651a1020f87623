// toolgate for the Vercel AI SDK (`ai` v6). Structural types: this module imports nothing
// from `ai`.
import type { Decision, Turn } from '../index';

/** Thrown from a wrapped `execute` for a denied call; the SDK reports it as a `tool-error`. */
export declare class ToolDenied extends Error {
  constructor(decision: Decision);
  readonly name: 'ToolDenied';
  readonly decision: Decision;
}

/**
 * A copy of `tools` whose `execute` functions are judged by `turn` first. Each also gets a
 * `needsApproval` that is true for a call the policy asks about (the SDK's tool approval
 * flow), besides the tool's own.
 */
export declare function guardTools<T extends Record<string, { execute?: (...args: any[]) => any }>>(
  turn: Turn,
  tools: T,
): T;

/** A `LanguageModelV3Middleware` (for `wrapLanguageModel`) judging each step's calls together. */
export declare function toolgateMiddleware(turn: Turn): {
  specificationVersion: 'v3';
  wrapGenerate: (options: { doGenerate: () => PromiseLike<any> }) => Promise<any>;
  wrapStream: (options: { doStream: () => PromiseLike<any> }) => Promise<any>;
};

/** The SDK's approval request part, as `answerApprovals` reads it. */
export interface ToolApprovalRequestPart {
  type: 'tool-approval-request';
  approvalId: string;
  toolCall: { toolCallId: string; toolName: string; input: unknown };
}

/** What an approver is asked: the SDK's request and toolgate's ask (null if not toolgate's). */
export interface ApprovalQuestion {
  approvalId: string;
  toolCall: { toolCallId: string; toolName: string; input: unknown };
  decision: Decision | null;
}

/** Yes is `true` or `{ approved: true }`; anything else is a no (`reason`: what the model reads). */
export type ApprovalAnswer = boolean | { approved: boolean; reason?: string } | null | undefined;

/** The tool message answering approval requests, to append to the next call's messages. */
export interface ToolApprovalMessage {
  role: 'tool';
  content: { type: 'tool-approval-response'; approvalId: string; approved: boolean; reason?: string }[];
}

/**
 * Asks `approver` about each approval request in `content` (a result's or a step's content)
 * and answers the tool message for the next call, or null when there is none. A yes to a
 * toolgate ask is recorded in `turn` at once; a no, or a throw, denies with a refusal.
 */
export declare function answerApprovals(
  turn: Turn,
  content: ReadonlyArray<{ type: string }>,
  approver: (question: ApprovalQuestion) => ApprovalAnswer | PromiseLike<ApprovalAnswer>,
): Promise<ToolApprovalMessage | null>;

/** The ask an SDK approval request for `toolCallId` stands for, while unanswered; else null. */
export declare function askOf(turn: Turn, toolCallId: string): Decision | null;
