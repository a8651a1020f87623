'use strict';
// The Vercel AI SDK adapter against the real `ai` package and its mock model (no network).
const test = require('node:test');
const assert = require('node:assert/strict');
const { generateText, streamText, tool, wrapLanguageModel, stepCountIs, simulateReadableStream } = require('ai');
const { MockLanguageModelV3 } = require('ai/test');
const { z } = require('zod');
const { load, Turn } = require('..');
const { guardTools, toolgateMiddleware } = require('../adapters/ai-sdk.js');
const { example } = require('./helpers.js');

const policy = load(example('coach').path);
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};
const toolCall = ([tool, args], i) =>
  ({ type: 'tool-call', toolCallId: `${tool}-${i}`, toolName: tool, input: JSON.stringify(args) });

// A scripted model: step i answers script[i], a list of [tool, args] calls or a final text.
function scriptedModel(script) {
  let step = 0;
  return new MockLanguageModelV3({
    doGenerate: async () => {
      const action = script[step++] ?? 'done';
      return typeof action === 'string'
        ? { content: [{ type: 'text', text: action }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] }
        : { content: action.map(toolCall), finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] };
    },
  });
}

// The coach's tools; `ran` lists the executes that actually ran.
function coachTools(ran) {
  const make = (name) => tool({
    description: name,
    inputSchema: z.object({}).passthrough(),
    execute: async (input) => { ran.push(name); return `${name} ok: ${JSON.stringify(input)}`; },
  });
  return Object.fromEntries(
    ['grade_attempt', 'search_aws_docs', 'fetch_vendor_doc', 'lookup_lesson'].map((n) => [n, make(n)]),
  );
}

// Every tool result and tool error the model was shown in its later prompts, by call id.
function shownToModel(model) {
  const shown = {};
  for (const call of model.doGenerateCalls) {
    for (const message of call.prompt) {
      if (message.role !== 'tool') continue;
      for (const part of message.content) shown[part.toolCallId] = part.output;
    }
  }
  return shown;
}

async function run(script, { middleware = true } = {}) {
  const turn = new Turn(policy, { stage: 'coach' });
  const ran = [];
  const base = scriptedModel(script);
  const model = middleware ? wrapLanguageModel({ model: base, middleware: toolgateMiddleware(turn) }) : base;
  const result = await generateText({
    model, tools: guardTools(turn, coachTools(ran)), prompt: 'help me', stopWhen: stepCountIs(5),
  });
  return { result, ran, turn, shown: shownToModel(base) };
}

test('an allowed call runs and its result reaches the model', async () => {
  const { ran, shown, turn, result } = await run([[['lookup_lesson', { id: 'l1' }]], 'ok']);
  assert.deepEqual(ran, ['lookup_lesson']);
  assert.equal(shown['lookup_lesson-0'].type, 'text');
  assert.match(shown['lookup_lesson-0'].value, /lookup_lesson ok/);
  assert.deepEqual(turn.called, [{ tool: 'lookup_lesson', ok: true }]);
  assert.equal(result.text, 'ok');
});

test('a denied call never runs; the model reads the refusal as the tool error', async () => {
  const { ran, shown } = await run([[['fetch_vendor_doc', { url: 'https://docs.aws.amazon.com.evil.tld/x' }]], 'sorry']);
  assert.deepEqual(ran, []);
  const output = shown['fetch_vendor_doc-0'];
  assert.equal(output.type, 'error-text');
  assert.match(output.value, /allowlist `vendor_docs`/);
});

test('the latch across one step: [grade_attempt, search_aws_docs] refuses the grade', async () => {
  const { ran, shown, turn } = await run([[['grade_attempt', { score: 1 }], ['search_aws_docs', { q: 'lambda' }]], 'ok']);
  assert.deepEqual(ran, ['search_aws_docs']);
  assert.equal(turn.latched, true);
  assert.equal(shown['grade_attempt-0'].type, 'error-text');
  assert.match(shown['grade_attempt-0'].value, /Blocked by design/);
  assert.equal(shown['search_aws_docs-1'].type, 'text');
});

// A model whose step i answers steps[i], a list of [id, tool, raw input text] calls, then text.
function modelOf(steps) {
  let step = 0;
  return new MockLanguageModelV3({
    doGenerate: async () => {
      const calls = steps[step++];
      return calls
        ? { content: calls.map(([id, tool, input]) => ({ type: 'tool-call', toolCallId: id, toolName: tool, input })),
          finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] }
        : { content: [{ type: 'text', text: 'ok' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] };
    },
  });
}

async function runSteps(steps) {
  const turn = new Turn(policy, { stage: 'coach' });
  const ran = [];
  const base = modelOf(steps);
  const result = await generateText({
    model: wrapLanguageModel({ model: base, middleware: toolgateMiddleware(turn) }),
    tools: guardTools(turn, coachTools(ran)), prompt: 'help', stopWhen: stepCountIs(steps.length + 1),
  });
  return { ran, turn, result, shown: shownToModel(base) };
}

test('a call the policy cannot judge is refused; its step is still judged, malformed call included', async () => {
  // The malformed search still counts in the step's latch pre-scan: the grade is refused.
  const { ran, shown, result } = await runSteps([
    [['a', 'lookup_lesson', '{"id":"l1"}'], ['b', 'search_aws_docs', '[1, 2]'], ['c', 'grade_attempt', '{"score":1}']],
  ]);
  assert.deepEqual(ran, ['lookup_lesson']);
  assert.equal(shown.a.type, 'text');
  assert.equal(shown.b.type, 'error-text'); // the SDK refuses input that is not an object
  assert.match(shown.c.value, /Blocked by design/);
  assert.equal(result.text, 'ok');
});

test('a step that cannot be judged whole still records the latches its tools set', async () => {
  // A call id given twice makes the step a request error; the search still latches it, so
  // the grade, executed first, is refused.
  const { ran } = await runSteps([
    [['dup', 'grade_attempt', '{"score":1}'], ['dup', 'search_aws_docs', '{"q":"x"}']],
  ]);
  assert.deepEqual(ran, ['search_aws_docs']);
});

test('a call id a later step reuses is judged as the call it is, not by the earlier verdict', async () => {
  // Providers that number calls per message reuse `call_0`; a verdict belongs to its step.
  const { ran, shown } = await runSteps([
    [['call_0', 'grade_attempt', '{"score":1}'], ['call_1', 'search_aws_docs', '{"q":"x"}']],
    [['call_0', 'lookup_lesson', '{"id":"l1"}']],
    [['call_0', 'grade_attempt', '{"score":2}']],
  ]);
  assert.deepEqual(ran, ['search_aws_docs', 'lookup_lesson']);
  assert.equal(shown.call_0.type, 'error-text'); // the last step's grade: still latched
  assert.match(shown.call_0.value, /Blocked by design/);
});

test('the latch across steps of a turn holds without the middleware too', async () => {
  const { ran, shown } = await run(
    [[['search_aws_docs', { q: 'lambda' }]], [['grade_attempt', { score: 1 }]], 'ok'], { middleware: false });
  assert.deepEqual(ran, ['search_aws_docs']);
  assert.match(shown['grade_attempt-0'].value, /Blocked by design/);
});

test('a streaming tool (an async iterable execute) is judged and passed through as a stream', async () => {
  const turn = new Turn(policy, { stage: 'coach' });
  const tools = guardTools(turn, {
    lookup_lesson: tool({
      inputSchema: z.object({}).passthrough(),
      async *execute() { yield 'part 1'; yield 'lesson text'; },
    }),
  });
  const base = scriptedModel([[['lookup_lesson', { id: 'l1' }]], 'ok']);
  const result = await generateText({ model: base, tools, prompt: 'p', stopWhen: stepCountIs(3) });
  assert.equal(shownToModel(base)['lookup_lesson-0'].value, 'lesson text'); // the last yield is the result
  assert.deepEqual(turn.called, [{ tool: 'lookup_lesson', ok: true }]);
  assert.equal(result.text, 'ok');
});

test('a tool that fails is recorded as not ok (called_before needs success)', async () => {
  const turn = new Turn(policy, { stage: 'coach' });
  const tools = guardTools(turn, {
    lookup_lesson: tool({ inputSchema: z.object({}).passthrough(), execute: async () => { throw new Error('down'); } }),
  });
  await generateText({ model: scriptedModel([[['lookup_lesson', {}]], 'ok']), tools, prompt: 'p', stopWhen: stepCountIs(3) });
  assert.deepEqual(turn.called, [{ tool: 'lookup_lesson', ok: false }]);
});

test('a new Turn (a new user message) resets the latch', async () => {
  await run([[['search_aws_docs', { q: 'lambda' }]], 'ok']);
  const { ran } = await run([[['grade_attempt', { score: 1 }]], 'graded']);
  assert.deepEqual(ran, ['grade_attempt']);
});

test('streamText: the middleware holds the step\'s calls and judges them together', async () => {
  const turn = new Turn(policy, { stage: 'coach' });
  const ran = [];
  let step = 0;
  const base = new MockLanguageModelV3({
    doStream: async () => {
      const chunks = step++ === 0
        ? [['grade_attempt', { score: 1 }], ['search_aws_docs', { q: 'x' }]].map(toolCall)
        : [{ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'ok' }, { type: 'text-end', id: 't' }];
      return {
        stream: simulateReadableStream({
          chunks: [{ type: 'stream-start', warnings: [] }, ...chunks,
            { type: 'finish', finishReason: { unified: step === 1 ? 'tool-calls' : 'stop', raw: undefined }, usage }],
        }),
      };
    },
  });
  const result = streamText({
    model: wrapLanguageModel({ model: base, middleware: toolgateMiddleware(turn) }),
    tools: guardTools(turn, coachTools(ran)), prompt: 'help', stopWhen: stepCountIs(3),
  });
  const errors = [];
  for await (const part of result.fullStream) if (part.type === 'tool-error') errors.push(part);
  assert.deepEqual(ran, ['search_aws_docs']);
  assert.equal(errors.length, 1);
  assert.equal(errors[0].toolName, 'grade_attempt');
  assert.match(String(errors[0].error.message), /Blocked by design/);
});

// The step's pre-scan and `needsApproval` judge without counting: each call is counted once,
// by the judgement it runs on.
test('a budget over batches lets the first lookups run and refuses the one over it', async () => {
  const { compile } = require('..');
  const source = require('node:fs').readFileSync(example('coach').path, 'utf8');
  const budgeted = compile(`${source}\nbudget lookups for lookup_lesson { count <= 2 per session }\n`, 'coach.gate');
  const turn = new Turn(budgeted, { stage: 'coach' });
  const ran = [];
  const base = scriptedModel([[['lookup_lesson', { id: 'l1' }]], [['lookup_lesson', { id: 'l2' }], ['lookup_lesson', { id: 'l3' }]], 'ok']);
  const model = wrapLanguageModel({ model: base, middleware: toolgateMiddleware(turn) });
  await generateText({ model, tools: guardTools(turn, coachTools(ran)), prompt: 'help me', stopWhen: stepCountIs(5) });
  assert.deepEqual(ran, ['lookup_lesson', 'lookup_lesson']);
  const refused = Object.values(shownToModel(base)).filter((o) => o.type === 'error-text');
  assert.equal(refused.length, 1);
  assert.match(refused[0].value, /0 of 2 left per session/);
});
