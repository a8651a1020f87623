// toolgate in front of an MCP client: `callTool` is judged before the request leaves.
// Run: node examples/mcp_client.js (a real MCP server from the SDK, over an in-memory transport)
const assert = require('node:assert/strict');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { InMemoryTransport } = require('@modelcontextprotocol/sdk/inMemory.js');
const { z } = require('zod');
const { compile, Turn } = require('toolgate');
const { guardClient } = require('toolgate/adapters/mcp');

const policy = compile(`
module coach
write  grade_attempt
ingest fetch_doc
stage coach { tools [grade_attempt, fetch_doc] }
latch docs_read { set_by ingest blocks write }
hosts docs { schemes [https] allow [".aws.amazon.com"] }
rule doc_host for fetch_doc { require args.url in hosts docs }
`, 'coach.gate');

async function main() {
  const server = new McpServer({ name: 'coach', version: '1.0.0' });
  server.registerTool('grade_attempt', { inputSchema: { score: z.number() } },
    async ({ score }) => ({ content: [{ type: 'text', text: `graded ${score}` }] }));
  server.registerTool('fetch_doc', { inputSchema: { url: z.string() } },
    async ({ url }) => ({ content: [{ type: 'text', text: `contents of ${url}` }] }));
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'executor', version: '1.0.0' });
  await client.connect(clientSide);

  // One Turn per user message; the guarded client is the SDK client with callTool judged.
  const mcp = guardClient(client, new Turn(policy, { stage: 'coach' }));

  const bad = await mcp.callTool({ name: 'fetch_doc', arguments: { url: 'https://docs.aws.amazon.com.evil.tld/' } });
  assert.equal(bad.isError, true); // a tool error result: the model reads the refusal
  assert.equal(bad.structuredContent.toolgate.kind, 'host');

  // A batch judged together: the fetch sets the latch, so the grade is refused in any order.
  const [grade, doc] = await mcp.callTools([
    { name: 'grade_attempt', arguments: { score: 1 } },
    { name: 'fetch_doc', arguments: { url: 'https://docs.aws.amazon.com/lambda' } },
  ]);
  assert.equal(grade.isError, true);
  assert.equal(grade.structuredContent.toolgate.kind, 'latch');
  assert.equal(doc.content[0].text, 'contents of https://docs.aws.amazon.com/lambda');
  await server.close();
  console.log('mcp_client.js: look-alike host and latched grade refused, fetch sent');
}

main();
