// Type-checks the declarations (index.d.ts, adapters/*.d.ts) against the ways the docs use
// them and against the real `ai` and MCP SDK types: `tsc -p test/types` must pass.
// `tsc -p test/types/tsconfig.dts.json` checks the declaration files themselves, which
// skipLibCheck (needed for the SDKs' own declarations) leaves unchecked here.
import { compile, load, CompileError, RequestError, Turn, TurnState, TurnError, type Call, type DecideRequest, type Decision, type Facts, type LatchState, type Response } from 'toolgate';
import { Turn as AdapterTurn } from 'toolgate/adapters/turn';
import { guardTools, toolgateMiddleware, ToolDenied, answerApprovals, askOf } from 'toolgate/adapters/ai-sdk';
import { guardClient } from 'toolgate/adapters/mcp';
import { generateText, tool, wrapLanguageModel, type ModelMessage } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { ElicitRequest, ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const policy = compile('module m', 'm.gate');
const other = load('m.gate');
const response: Response = policy.decide({ facts: { stage: 's' }, calls: [{ id: 'a', tool: 't', args: {} }] });
const first: Decision = response.decisions[0];
const reason: string | undefined = first.reason;
const fromText: Response = other.decide('{"calls": []}');
const text: string = policy.decideText({ calls: [] });
const offered: string[] = policy.offer({ tools: [{ name: 't' }] }).tools.map((t) => t.name);
const steps = policy.explain({ calls: [] })[0].steps.map((s) => s.check);
const meta: [string, string, number] = [policy.name, policy.revision, policy.warnings.length];
const asking: [number, boolean] = [policy.approvalWindowMs, policy.mayAsk];

// The wire types come from wire.d.ts, generated from the engine's Rust types: every standard
// fact, the response's budget counts, and closed objects where the engine's reader is closed.
const fullFacts: DecideRequest = {
  facts: {
    stage: 's', stage_turns: 1, latched: { egress: true }, messages: [{ from: 'client', media: ['image'], text: 'hi' }],
    fields: { name: 'Ann' }, called: [{ tool: 't', ok: true, turns_ago: 0 }], approvals: [], prompt: 'p',
    principal: { sub: 'u1', tenant: 'acme', claims: { role: 'admin' } }, spent: { daily: 2 },
    outputs: [{ id: 'a', tool: 't', output: { body: 'x' } }], my_custom_fact: 3,
  },
  calls: [{ id: 'a', tool: 't' }],
};
const spentNow: number | undefined = fromText.spent?.daily;
const shadowed: string[] | undefined = first.shadow_denials;
// @ts-expect-error a call is closed: OpenAI's `arguments` is refused, as the engine refuses it
const openAiCall: Call = { id: 'a', tool: 't', arguments: {} };
// @ts-expect-error a principal has `sub`, `tenant` and `claims` only
const badPrincipal: Facts = { principal: { subject: 'u1' } };

try {
  compile('');
} catch (e) {
  if (e instanceof CompileError) e.diagnostics.map((d) => [d.line, d.column, d.severity, d.help]);
  if (e instanceof RequestError) console.log(e.field);
}

const turn = new Turn(policy, { stage: 's' });
const decisions: Decision[] = turn.decide([{ id: 'a', tool: 't', args: {} }]);
turn.record('t', true);
const timed = new Turn(policy, { stage: 's', approvals: [] }, { clock: () => performance.now() });
const asked: Decision = timed.decide([{ id: 'a', tool: 't', args: {} }], { spend: false })[0];
if (asked.kind === 'ask' && asked.approval) timed.approve(asked.approval);
const live: string[] = timed.approvals;
const withdrawn: boolean = timed.reject('ap1:00');
const state = new TurnState();
state.signal(policy, 'msg-1');
const judged: Response = state.judge(policy, { calls: [] }, 'msg-1', 'm1');
const kept: Decision | null = state.decision(policy, 'a', 't', {}, 'msg-1', 'm1');
state.recordCall('t', true, 'msg-1');
const prompted: boolean = state.setPrompt('the user said', 'msg-1') && state.setPrompt('again');
const latches: LatchState = state.latches(policy, 'msg-1');
const ages: (number | undefined)[] = state.called.map((c) => c.turns_ago);
const again = new AdapterTurn(policy, { stage: 's' }, { state, id: 'msg-1' });
const next: Turn = again.next();
const batchVerdict: Decision | null = next.batchDecision('a', 't', '{}', 'm1');
const kinds: string[] = [turn.latched, next.id, again.state.turns].map(String);
try {
  turn.decide([], { batch: 'm2' });
} catch (e) {
  if (e instanceof TurnError && e.kind === 'policy_changed') console.log(e.message);
}

const tools = guardTools(turn, {
  t: tool({ inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => q }),
});
const model = wrapLanguageModel({ model: new MockLanguageModelV3(), middleware: toolgateMiddleware(turn) });
void generateText({ model, tools, prompt: 'p' });
void (async () => {
  const result = await generateText({ model, tools, prompt: 'p' });
  const reply = await answerApprovals(turn, result.content, async ({ decision, toolCall }) =>
    decision?.kind === 'ask' && toolCall.toolName === 't' ? true : { approved: false, reason: 'no' });
  const messages: ModelMessage[] = [...result.response.messages, ...(reply ? [reply] : [])];
  const pending: Decision | null = askOf(turn, 'c1');
  return [messages, pending];
})();
const denied = new ToolDenied(first);

const client = guardClient(new Client({ name: 'c', version: '1' }), turn);
void client.callTool({ name: 't', arguments: {} });
void client.callTools([{ name: 't', arguments: {} }]);
void client.listTools();
// An approver is an elicitation UI: it takes the SDK's ElicitRequest and answers an ElicitResult.
const elicit = async (request: ElicitRequest): Promise<ElicitResult> =>
  request.params.message.length > 0 ? { action: 'accept', content: { approve: true } } : { action: 'decline' };
const asking2 = guardClient(new Client({ name: 'c', version: '1' }), turn, {
  approver: (request, { decision, tool: name }) => (decision.kind === 'ask' && name === 't' ? elicit(request) : undefined),
});
void asking2.callTool({ name: 't', arguments: {} });

export { asking, live, withdrawn, reason, fromText, text, offered, steps, meta, decisions, denied, judged, kept, latches, ages, batchVerdict, kinds };
