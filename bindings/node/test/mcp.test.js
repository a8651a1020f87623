'use strict';
// The MCP adapter against a real server and client of the official TypeScript SDK, linked
// by the SDK's in-memory transport.
const test = require('node:test');
const assert = require('node:assert/strict');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { InMemoryTransport } = require('@modelcontextprotocol/sdk/inMemory.js');
const { z } = require('zod');
const { compile, load, Turn } = require('..');
const { guardClient } = require('../adapters/mcp.js');
const { example } = require('./helpers.js');

const policy = load(example('coach').path);

// A coach MCP server; `ran` lists the tool handlers that actually ran.
async function connect() {
  const ran = [];
  const server = new McpServer({ name: 'coach', version: '1.0.0' });
  const register = (name, inputSchema) => server.registerTool(name, { description: name, inputSchema }, async (args) => {
    ran.push(name);
    return { content: [{ type: 'text', text: `${name} ok: ${JSON.stringify(args)}` }] };
  });
  register('grade_attempt', { attempt: z.string(), score: z.number() });
  register('search_aws_docs', { q: z.string() });
  register('fetch_vendor_doc', { url: z.string() });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'executor', version: '1.0.0' });
  await client.connect(clientSide);
  return { client, server, ran };
}

test('an allowed call reaches the server; the rest of the client is untouched', async () => {
  const { client, server, ran } = await connect();
  const turn = new Turn(policy, { stage: 'coach' });
  const guarded = guardClient(client, turn);
  const listed = await guarded.listTools();
  assert.deepEqual(listed.tools.map((t) => t.name).sort(), ['fetch_vendor_doc', 'grade_attempt', 'search_aws_docs']);
  const result = await guarded.callTool({ name: 'grade_attempt', arguments: { attempt: 'a-1', score: 1 } });
  assert.equal(result.isError, undefined);
  assert.match(result.content[0].text, /grade_attempt ok/);
  assert.deepEqual(ran, ['grade_attempt']);
  assert.deepEqual(turn.called, [{ tool: 'grade_attempt', ok: true }]);
  await server.close();
});

test('a denied call never reaches the server; the caller gets the tool error result', async () => {
  const { client, server, ran } = await connect();
  const guarded = guardClient(client, new Turn(policy, { stage: 'coach' }));
  const result = await guarded.callTool({ name: 'fetch_vendor_doc', arguments: { url: 'https://docs.aws.amazon.com.evil.tld/x' } });
  assert.equal(result.isError, true);
  assert.match(result.content[0].text, /allowlist `vendor_docs`/);
  assert.equal(result.structuredContent.toolgate.kind, 'host');
  assert.deepEqual(ran, []);
  await server.close();
});

test('the latch across a batch: callTools([grade, search]) refuses the grade, sends the search', async () => {
  const { client, server, ran } = await connect();
  const guarded = guardClient(client, new Turn(policy, { stage: 'coach' }));
  const [grade, search] = await guarded.callTools([
    { name: 'grade_attempt', arguments: { attempt: 'a-1', score: 1 } },
    { name: 'search_aws_docs', arguments: { q: 'lambda limits' } },
  ]);
  assert.equal(grade.isError, true);
  assert.match(grade.content[0].text, /Blocked by design/);
  assert.equal(grade.structuredContent.toolgate.kind, 'latch');
  assert.match(search.content[0].text, /search_aws_docs ok/);
  assert.deepEqual(ran, ['search_aws_docs']);
  await server.close();
});

test('the latch across single calls of one turn, and a new turn resets it', async () => {
  const { client, server, ran } = await connect();
  const turn = new Turn(policy, { stage: 'coach' });
  const guarded = guardClient(client, turn);
  await guarded.callTool({ name: 'search_aws_docs', arguments: { q: 'lambda' } });
  const refused = await guarded.callTool({ name: 'grade_attempt', arguments: { attempt: 'a-1', score: 1 } });
  assert.equal(refused.isError, true);
  const next = guardClient(client, new Turn(policy, { stage: 'coach' }));
  const graded = await next.callTool({ name: 'grade_attempt', arguments: { attempt: 'a-1', score: 1 } });
  assert.equal(graded.isError, undefined);
  assert.deepEqual(ran, ['search_aws_docs', 'grade_attempt']);
  await server.close();
});

test('a call the policy cannot judge is refused with the reason, not thrown', async () => {
  const { client, server, ran } = await connect();
  const guarded = guardClient(client, new Turn(policy, { stage: 'coach' }));
  const result = await guarded.callTool({ name: 'search_aws_docs', arguments: ['not', 'an', 'object'] });
  assert.equal(result.isError, true);
  assert.match(result.content[0].text, /could not judge this call: request field `calls\[0\]\.args`/);
  assert.deepEqual(ran, []);
  await server.close();
});

test('a turn the policy can no longer judge is refused with the reason, not sent', async () => {
  const { client, server, ran } = await connect();
  const first = new Turn(policy, { stage: 'coach' }, { id: 'm1' });
  first.decideOne({ id: 's', tool: 'search_aws_docs', args: { q: 'lambda' } });
  // The policy reloaded mid-turn, its latch renamed: the turn's set latch is not declared.
  const renamed = compile(example('coach').text.replace(/documentation_read/g, 'docs_read'), 'coach.gate');
  const guarded = guardClient(client, new Turn(renamed, { stage: 'coach' }, { state: first.state, id: 'm1' }));
  const result = await guarded.callTool({ name: 'search_aws_docs', arguments: { q: 'lambda' } });
  assert.equal(result.isError, true);
  assert.match(result.content[0].text, /could not judge this call: the policy changed under a latched turn/);
  assert.deepEqual(ran, []);
  await server.close();
});
