// toolgate in a Vercel AI SDK agent: every tool call is judged before its `execute` runs.
// Run: node examples/ai_sdk.js (a scripted mock model; no network, no API key)
const assert = require('node:assert/strict');
const { generateText, tool, wrapLanguageModel, stepCountIs } = require('ai');
const { MockLanguageModelV3 } = require('ai/test');
const { z } = require('zod');
const { compile, Turn } = require('toolgate');
const { guardTools, toolgateMiddleware } = require('toolgate/adapters/ai-sdk');

const policy = compile(`
module coach
write  grade_attempt
ingest search_docs
stage coach { tools [grade_attempt, search_docs] }
latch docs_read {
  set_by ingest
  blocks write
  refusal "Grading is off for this turn: documentation was read. Ask the learner to resubmit."
}
`, 'coach.gate');

const tools = {
  grade_attempt: tool({
    inputSchema: z.object({ score: z.number() }),
    execute: async ({ score }) => `graded ${score}`,
  }),
  search_docs: tool({
    inputSchema: z.object({ q: z.string() }),
    execute: async ({ q }) => `docs about ${q}`,
  }),
};

// A stand-in model: one step asks for [grade_attempt, search_docs], the next one answers.
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};
const steps = [
  { content: [
    { type: 'tool-call', toolCallId: 'c1', toolName: 'grade_attempt', input: '{"score":1}' },
    { type: 'tool-call', toolCallId: 'c2', toolName: 'search_docs', input: '{"q":"lambda"}' },
  ], finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] },
  { content: [{ type: 'text', text: 'Please resubmit.' }],
    finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] },
];
const model = new MockLanguageModelV3({ doGenerate: async () => steps.shift() });

async function userTurn(message) {
  const turn = new Turn(policy, { stage: 'coach' }); // one per user message
  const result = await generateText({
    model: wrapLanguageModel({ model, middleware: toolgateMiddleware(turn) }),
    tools: guardTools(turn, tools),
    prompt: message,
    stopWhen: stepCountIs(4),
  });
  return result.steps[0].content;
}

userTurn('grade my attempt and look up lambda').then((parts) => {
  const grade = parts.find((p) => p.toolCallId === 'c1' && p.type !== 'tool-call');
  const search = parts.find((p) => p.toolCallId === 'c2' && p.type === 'tool-result');
  assert.equal(grade.type, 'tool-error'); // the model reads the refusal as the tool's error
  assert.match(grade.error.message, /Grading is off/);
  assert.equal(search.output, 'docs about lambda');
  console.log('ai_sdk.js: grade refused by the latch, search ran');
});
