'use strict';
// Asks through the MCP client guard, against a real server and client of the official
// TypeScript SDK: an approver modelled on MCP elicitation (it is handed an `ElicitRequest`,
// form mode, and answers an `ElicitResult`), checked with the SDK's own schemas.
const test = require('node:test');
const assert = require('node:assert/strict');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { InMemoryTransport } = require('@modelcontextprotocol/sdk/inMemory.js');
const { ElicitRequestSchema, ElicitResultSchema } = require('@modelcontextprotocol/sdk/types.js');
const { z } = require('zod');
const { compile, Turn } = require('..');
const { guardClient } = require('../adapters/mcp.js');

const REFUNDS = `module refunds
write refund
stage main { tools [refund] }
rule refunds for refund {
  require args.amount is number and args.amount <= 500
  ask when args.amount > 50
}
`;
const refunds = compile(REFUNDS, 'refunds.gate');
const quick = compile(`${REFUNDS}approvals { valid_for 1s }\n`, 'refunds.gate');

async function connect() {
  const ran = [];
  const server = new McpServer({ name: 'shop', version: '1.0.0' });
  server.registerTool('refund', { description: 'refund', inputSchema: { amount: z.number() } }, async ({ amount }) => {
    ran.push(amount);
    return { content: [{ type: 'text', text: `refunded ${amount}` }] };
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'executor', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
  await client.connect(clientSide);
  return { client, server, ran };
}

const yes = { action: 'accept', content: { approve: true } };
const no = { action: 'decline' };

/** An approver answering `answers` (ElicitResults) in order; checks each question is an ElicitRequest. */
function scripted(answers) {
  const asked = [];
  const approver = async (request, context) => {
    ElicitRequestSchema.parse(request); // the SDK's own shape for an elicitation
    asked.push({ request, context });
    const answer = answers[asked.length - 1];
    if (answer === undefined) throw new Error('asked more often than scripted');
    return typeof answer === 'object' ? ElicitResultSchema.parse(answer) : answer;
  };
  approver.asked = asked;
  return approver;
}

test('yes sends the asked call exactly once; the same call again asks; no never sends it', async () => {
  const { client, server, ran } = await connect();
  const turn = new Turn(refunds, { stage: 'main' });
  const approver = scripted([yes, no]);
  const guarded = guardClient(client, turn, { approver });
  const first = await guarded.callTool({ name: 'refund', arguments: { amount: 100 } });
  assert.equal(first.isError, undefined);
  assert.match(first.content[0].text, /refunded 100/);
  assert.deepEqual(ran, [100]);
  const { request, context } = approver.asked[0];
  assert.equal(request.method, 'elicitation/create');
  assert.equal(request.params.mode, 'form');
  assert.match(request.params.message, /`refund`.*"amount":100/);
  assert.equal(request.params.requestedSchema.properties.approve.type, 'boolean');
  assert.equal(context.decision.kind, 'ask');
  assert.equal(context.tool, 'refund');
  assert.deepEqual(turn.approvals, []); // used by the call it allowed
  // The same call again: asked again, and this time declined.
  const second = await guarded.callTool({ name: 'refund', arguments: { amount: 100 } });
  assert.equal(approver.asked.length, 2);
  assert.equal(second.isError, true);
  assert.match(second.content[0].text, /declined this call of `refund`.*has NOT run/);
  assert.equal(second.structuredContent.toolgate.kind, 'ask');
  assert.deepEqual(ran, [100]);
  await server.close();
});

test('without an approver an ask is a denial carrying the ask\'s reason', async () => {
  const { client, server, ran } = await connect();
  const guarded = guardClient(client, new Turn(refunds, { stage: 'main' }));
  const result = await guarded.callTool({ name: 'refund', arguments: { amount: 100 } });
  assert.equal(result.isError, true);
  assert.match(result.content[0].text, /^Approval needed: rule `refunds`/);
  assert.match(result.structuredContent.toolgate.approval, /^ap1:/);
  assert.deepEqual(ran, []);
  await server.close();
});

test('an approver that fails, cancels or answers anything but an accepted yes is a no', async () => {
  const answers = [
    { action: 'cancel' }, { action: 'accept', content: { approve: false } }, { action: 'accept' },
    { action: 'accept', content: { approve: 'true' } }, true, undefined,
  ];
  const { client, server, ran } = await connect();
  for (const answer of answers) {
    const turn = new Turn(refunds, { stage: 'main' });
    const guarded = guardClient(client, turn, { approver: async () => answer });
    const result = await guarded.callTool({ name: 'refund', arguments: { amount: 100 } });
    assert.equal(result.isError, true, JSON.stringify(answer));
    assert.deepEqual(turn.approvals, []);
  }
  const failing = guardClient(client, new Turn(refunds, { stage: 'main' }), { approver: async () => { throw new Error('ui gone'); } });
  const result = await failing.callTool({ name: 'refund', arguments: { amount: 100 } });
  assert.match(result.content[0].text, /ui gone/);
  assert.deepEqual(ran, []);
  assert.throws(() => guardClient(client, new Turn(refunds, {}), { approver: 'yes' }), /approver is a function/);
  await server.close();
});

test('an approval that expired before the call is judged again asks again', async () => {
  const { client, server, ran } = await connect();
  let now = 0;
  const turn = new Turn(quick, { stage: 'main' }, { clock: () => now });
  // A slow person: the answer comes 1 s after the question, when valid_for 1s is over.
  const approver = async () => { const answer = yes; now += 1000; return answer; };
  // The approval is timed when the person answers, so it is live here: the call runs.
  const guarded = guardClient(client, turn, { approver });
  assert.equal((await guarded.callTool({ name: 'refund', arguments: { amount: 100 } })).isError, undefined);
  // Approved now, but the call comes after the window: asked again.
  const asked = turn.decideOne({ id: 'x', tool: 'refund', args: { amount: 100 } });
  turn.approve(asked.approval);
  now += 1000;
  const late = await guardClient(client, turn).callTool({ name: 'refund', arguments: { amount: 100 } });
  assert.equal(late.isError, true);
  assert.match(late.content[0].text, /^Approval needed/);
  assert.deepEqual(ran, [100]);
  await server.close();
});

test('an approval for other arguments does not send the call', async () => {
  const { client, server, ran } = await connect();
  const turn = new Turn(refunds, { stage: 'main' });
  turn.approve(turn.decideOne({ id: 'x', tool: 'refund', args: { amount: 100 } }).approval);
  const guarded = guardClient(client, turn);
  const other = await guarded.callTool({ name: 'refund', arguments: { amount: 101 } });
  assert.equal(other.isError, true);
  assert.match(other.content[0].text, /^Approval needed/);
  assert.deepEqual(ran, []);
  const exact = await guarded.callTool({ name: 'refund', arguments: { amount: 100 } });
  assert.equal(exact.isError, undefined);
  assert.deepEqual(ran, [100]);
  await server.close();
});

test('callTools: each ask of the batch is asked in order; one yes lets one of two identical calls run', async () => {
  const { client, server, ran } = await connect();
  const approver = scripted([yes, no]);
  const guarded = guardClient(client, new Turn(refunds, { stage: 'main' }), { approver });
  const results = await guarded.callTools([
    { name: 'refund', arguments: { amount: 100 } },
    { name: 'refund', arguments: { amount: 20 } },
    { name: 'refund', arguments: { amount: 100 } },
  ]);
  assert.deepEqual(results.map((r) => r.isError === true), [false, false, true]);
  assert.deepEqual(ran, [100, 20]);
  assert.equal(approver.asked.length, 2);
  await server.close();
});
