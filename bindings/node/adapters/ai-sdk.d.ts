// toolgate for the Vercel AI SDK (`ai` v6). Structural types: this module imports nothing
// from `ai`.
import type { Decision, Turn } from '../index';

/** Thrown from a wrapped `execute` for a denied call; the SDK reports it as a `tool-error`. */
export declare class ToolDenied extends Error {
  constructor(decision: Decision);
  readonly name: 'ToolDenied';
  readonly decision: Decision;
}

/** A copy of `tools` whose `execute` functions are judged by `turn` first. */
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
