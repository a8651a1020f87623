// toolgate for the MCP TypeScript SDK's Client. Structural types: this module imports nothing
// from `@modelcontextprotocol/sdk`.
import type { Decision, Turn } from '../index';

export interface CallToolParams {
  name: string;
  arguments?: Record<string, unknown>;
  [key: string]: unknown;
}

/** A client whose `callTool` is judged first, with `callTools` to judge a batch together. */
export type GuardedClient<C> = C & {
  callTools(batch: CallToolParams[], ...rest: unknown[]): Promise<any[]>;
};

/** The question an ask puts to the approver: an MCP `ElicitRequest` (form mode). */
export interface ApprovalElicitation {
  method: 'elicitation/create';
  params: {
    mode: 'form';
    message: string;
    requestedSchema: {
      type: 'object';
      properties: { approve: { type: 'boolean'; title: string; description: string; default: boolean } };
      required: ['approve'];
    };
  };
}

/** An MCP `ElicitResult`: only `{ action: 'accept', content: { approve: true } }` is a yes. */
export interface ApprovalElicitResult {
  action: 'accept' | 'decline' | 'cancel';
  content?: { [field: string]: string | number | boolean | string[] };
  [extra: string]: unknown;
}

/** toolgate's context for an approver: the call and its ask. */
export interface ApprovalContext {
  tool: string;
  arguments: Record<string, unknown>;
  decision: Decision;
}

export interface GuardOptions {
  /**
   * Asked about each ask; a yes lets exactly that call run once. Without one, an ask is a
   * denial carrying its reason. A throw, or any answer but an accepted yes, is a no.
   */
  approver?: (
    request: ApprovalElicitation,
    context: ApprovalContext,
  ) => ApprovalElicitResult | null | undefined | PromiseLike<ApprovalElicitResult | null | undefined>;
}

export declare function guardClient<C extends { callTool: (...args: any[]) => any }>(
  client: C,
  turn: Turn,
  options?: GuardOptions,
): GuardedClient<C>;
