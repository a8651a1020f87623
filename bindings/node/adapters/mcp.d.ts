// toolgate for the MCP TypeScript SDK's Client. Structural types: this module imports nothing
// from `@modelcontextprotocol/sdk`.
import type { Turn } from '../index';

export interface CallToolParams {
  name: string;
  arguments?: Record<string, unknown>;
  [key: string]: unknown;
}

/** A client whose `callTool` is judged first, with `callTools` to judge a batch together. */
export type GuardedClient<C> = C & {
  callTools(batch: CallToolParams[], ...rest: unknown[]): Promise<any[]>;
};

export declare function guardClient<C extends { callTool: (...args: any[]) => any }>(
  client: C,
  turn: Turn,
): GuardedClient<C>;
