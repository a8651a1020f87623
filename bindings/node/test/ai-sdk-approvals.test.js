'use strict';
// Asks through the Vercel AI SDK's own tool approval flow (`needsApproval`, the
// `tool-approval-request` part, a `tool-approval-response` in the next call's messages),
// against the real `ai` package; only the model is the SDK's mock.
const test = require('node:test');
const assert = require('node:assert/strict');
const { generateText, streamText, tool, wrapLanguageModel, stepCountIs, simulateReadableStream } = require('ai');
const { MockLanguageModelV3 } = require('ai/test');
const { z } = require('zod');
const { compile, Turn } = require('..');
const { guardTools, toolgateMiddleware, answerApprovals, askOf } = require('../adapters/ai-sdk.js');

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
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

// A model whose step i (counted across generateText calls) makes the calls steps[i], a list
// of [id, tool, args], then answers text.
function modelOf(steps) {
  let step = 0;
  return new MockLanguageModelV3({
    doGenerate: async () => {
      const calls = steps[step++];
      return calls
        ? { content: calls.map(([id, tool, args]) => ({ type: 'tool-call', toolCallId: id, toolName: tool, input: JSON.stringify(args) })),
          finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] }
        : { content: [{ type: 'text', text: 'ok' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] };
    },
  });
}

// What the model was shown for each tool call in its latest prompt, by call id.
function shownLast(model) {
  const shown = {};
  const last = model.doGenerateCalls.at(-1);
  for (const message of last.prompt) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) if (part.type === 'tool-result') shown[part.toolCallId] = part.output;
  }
  return shown;
}

function refundTools(ran) {
  return {
    refund: tool({
      description: 'refund',
      inputSchema: z.object({ amount: z.number() }),
      execute: async ({ amount }) => { ran.push(amount); return `refunded ${amount}`; },
    }),
  };
}

/** An approver that answers `answers` in order and records what it was asked. */
function scripted(answers) {
  const asked = [];
  const approver = async (request) => {
    asked.push(request);
    if (asked.length > answers.length) throw new Error('asked more often than scripted');
    return answers[asked.length - 1];
  };
  approver.asked = asked;
  return approver;
}

const requests = (result) => result.content.filter((p) => p.type === 'tool-approval-request');

test('yes runs the asked call exactly once; the same call again asks; no never runs it', async () => {
  const turn = new Turn(refunds, { stage: 'main' });
  const ran = [];
  const base = modelOf([[['c1', 'refund', { amount: 100 }]], [['c2', 'refund', { amount: 100 }]]]);
  const model = wrapLanguageModel({ model: base, middleware: toolgateMiddleware(turn) });
  const tools = guardTools(turn, refundTools(ran));
  const approver = scripted([true, false]);
  let messages = [{ role: 'user', content: 'refund 100' }];

  // 1. The model asks for a refund of 100: the SDK stops for an approval, nothing ran.
  const first = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
  assert.deepEqual(ran, []);
  const [req1] = requests(first);
  assert.equal(req1.toolCall.toolCallId, 'c1');
  assert.equal(askOf(turn, 'c1').kind, 'ask');
  assert.match(askOf(turn, 'c1').reason, /rule `refunds`/);

  // 2. The person says yes: the continuation runs it, once.
  const yes = await answerApprovals(turn, first.content, approver);
  assert.deepEqual(yes.content, [{ type: 'tool-approval-response', approvalId: req1.approvalId, approved: true }]);
  assert.equal(approver.asked[0].decision.kind, 'ask');
  assert.equal(approver.asked[0].toolCall.toolName, 'refund');
  messages = [...messages, ...first.response.messages, yes];
  const second = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
  assert.deepEqual(ran, [100]);
  assert.equal(shownLast(base).c1.type, 'text');
  assert.match(shownLast(base).c1.value, /refunded 100/);
  // The model asks for the same refund again: the approval was used, so it asks again.
  const [req2] = requests(second);
  assert.equal(req2.toolCall.toolCallId, 'c2');
  assert.deepEqual(turn.approvals, []);

  // 3. The person says no: it does not run, and the model reads the refusal.
  const no = await answerApprovals(turn, second.content, approver);
  assert.equal(no.content[0].approved, false);
  messages = [...messages, ...second.response.messages, no];
  const third = await generateText({ model, tools, messages, stopWhen: stepCountIs(5) });
  assert.deepEqual(ran, [100]);
  const refused = shownLast(base).c2;
  assert.equal(refused.type, 'execution-denied');
  assert.match(refused.reason, /declined this call of `refund`.*has NOT run/);
  assert.equal(third.text, 'ok');
  assert.equal(approver.asked.length, 2);
});

test('an approval answered in the SDK\'s own messages (no helper) is recorded when the call runs', async () => {
  const turn = new Turn(refunds, { stage: 'main' });
  const ran = [];
  const model = modelOf([[['c1', 'refund', { amount: 100 }]]]);
  const tools = guardTools(turn, refundTools(ran));
  const messages = [{ role: 'user', content: 'refund 100' }];
  const first = await generateText({ model, tools, messages });
  const [req] = requests(first);
  const answer = { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: req.approvalId, approved: true }] };
  await generateText({ model, tools, messages: [...messages, ...first.response.messages, answer] });
  assert.deepEqual(ran, [100]);
  assert.deepEqual(turn.approvals, []); // used by the call it allowed
});

test('an approval that expired before the call ran asks again', async () => {
  let now = 0;
  const turn = new Turn(quick, { stage: 'main' }, { clock: () => now });
  const ran = [];
  const base = modelOf([[['c1', 'refund', { amount: 100 }]], [['c2', 'refund', { amount: 100 }]]]);
  const tools = guardTools(turn, refundTools(ran));
  let messages = [{ role: 'user', content: 'refund 100' }];
  const first = await generateText({ model: base, tools, messages, stopWhen: stepCountIs(5) });
  const yes = await answerApprovals(turn, first.content, scripted([true]));
  now += 1000; // valid_for 1s: the approval is over before the continuation comes
  messages = [...messages, ...first.response.messages, yes];
  const second = await generateText({ model: base, tools, messages, stopWhen: stepCountIs(5) });
  assert.deepEqual(ran, []);
  const shown = shownLast(base).c1;
  assert.equal(shown.type, 'error-text');
  assert.match(shown.value, /^Approval needed/);
  assert.equal(requests(second)[0].toolCall.toolCallId, 'c2'); // the model's retry asks again
});

test('a live approval lets exactly its call run without asking; other arguments ask', async () => {
  const turn = new Turn(refunds, { stage: 'main' });
  turn.approve(turn.decide([{ id: 'x', tool: 'refund', args: { amount: 100 } }], { spend: false })[0].approval);
  const ran = [];
  const base = modelOf([[['c1', 'refund', { amount: 101 }]]]);
  const tools = guardTools(turn, refundTools(ran));
  const other = await generateText({ model: base, tools, prompt: 'refund 101' });
  assert.deepEqual(ran, []);
  assert.equal(requests(other)[0].toolCall.toolCallId, 'c1');
  const exact = await generateText({ model: modelOf([[['c2', 'refund', { amount: 100 }]]]), tools, prompt: 'p', stopWhen: stepCountIs(3) });
  assert.deepEqual(ran, [100]);
  assert.equal(requests(exact).length, 0);
  assert.deepEqual(turn.approvals, []);
});

test('a denial that is not an ask is no approval request: the model reads the refusal', async () => {
  const turn = new Turn(refunds, { stage: 'main' });
  const ran = [];
  const base = modelOf([[['c1', 'refund', { amount: 600 }]]]);
  const result = await generateText({ model: base, tools: guardTools(turn, refundTools(ran)), prompt: 'p', stopWhen: stepCountIs(3) });
  assert.deepEqual(ran, []);
  assert.equal(requests(result).length, 0);
  assert.equal(shownLast(base).c1.type, 'error-text');
  assert.doesNotMatch(shownLast(base).c1.value, /Approval needed/);
});

test('an approver that fails or answers anything but yes is a no', async () => {
  for (const answer of [undefined, 'yes', 1, { approved: 'true' }]) {
    const turn = new Turn(refunds, { stage: 'main' });
    const ran = [];
    const base = modelOf([[['c1', 'refund', { amount: 100 }]]]);
    const tools = guardTools(turn, refundTools(ran));
    const messages = [{ role: 'user', content: 'p' }];
    const first = await generateText({ model: base, tools, messages });
    const reply = await answerApprovals(turn, first.content, async () => answer);
    assert.equal(reply.content[0].approved, false, String(answer));
    await generateText({ model: base, tools, messages: [...messages, ...first.response.messages, reply] });
    assert.deepEqual(ran, []);
  }
  const turn = new Turn(refunds, { stage: 'main' });
  const first = await generateText({ model: modelOf([[['c1', 'refund', { amount: 100 }]]]), tools: guardTools(turn, refundTools([])), prompt: 'p' });
  const reply = await answerApprovals(turn, first.content, async () => { throw new Error('ui gone'); });
  assert.equal(reply.content[0].approved, false);
  assert.match(reply.content[0].reason, /ui gone/);
});

test('streamText: an ask is an approval request in the stream; the approved call then runs once', async () => {
  const turn = new Turn(refunds, { stage: 'main' });
  const ran = [];
  let step = 0;
  const base = new MockLanguageModelV3({
    doStream: async () => {
      const chunks = step++ === 0
        ? [{ type: 'tool-call', toolCallId: 'c1', toolName: 'refund', input: '{"amount":100}' }]
        : [{ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'done' }, { type: 'text-end', id: 't' }];
      return {
        stream: simulateReadableStream({
          chunks: [{ type: 'stream-start', warnings: [] }, ...chunks,
            { type: 'finish', finishReason: { unified: step === 1 ? 'tool-calls' : 'stop', raw: undefined }, usage }],
        }),
      };
    },
  });
  const model = wrapLanguageModel({ model: base, middleware: toolgateMiddleware(turn) });
  const tools = guardTools(turn, refundTools(ran));
  const messages = [{ role: 'user', content: 'refund 100' }];
  const first = streamText({ model, tools, messages, stopWhen: stepCountIs(3) });
  const parts = [];
  for await (const part of first.fullStream) parts.push(part);
  assert.deepEqual(ran, []);
  const asked = parts.filter((p) => p.type === 'tool-approval-request');
  assert.equal(asked.length, 1);
  const reply = await answerApprovals(turn, asked, scripted([true]));
  const second = streamText({ model, tools, messages: [...messages, ...(await first.response).messages, reply], stopWhen: stepCountIs(3) });
  assert.equal(await second.text, 'done');
  assert.deepEqual(ran, [100]);
});
