// Run by ci.sh from a fresh application that installed the `toolgate` package (from its
// packed tarball, or from a path): the package as a dependency loads, compiles a shipped
// policy and decides its example batch. Not part of `npm test` (it needs that install).
// Usage: node --test installed.test.js, with TOOLGATE_EXAMPLES set to stdlib-rules/examples.
'use strict';
const assert = require('node:assert/strict');
const { readFileSync, realpathSync } = require('node:fs');
const { join } = require('node:path');
const { test } = require('node:test');
const toolgate = require('toolgate');

const examples = process.env.TOOLGATE_EXAMPLES;

test('the installed package compiles coach.gate and decides coach.request.json', () => {
  assert.ok(examples, 'TOOLGATE_EXAMPLES must name stdlib-rules/examples');
  // The package this app installed: under its node_modules for the tarball, the checkout
  // (through node_modules/toolgate, a link) for a path.
  assert.equal(realpathSync(join(require.resolve('toolgate'), '..')), process.env.TOOLGATE_EXPECT_AT);
  const policy = toolgate.compile(readFileSync(join(examples, 'coach.gate'), 'utf8'), 'coach.gate');
  assert.equal(policy.name, 'coach');
  const request = JSON.parse(readFileSync(join(examples, 'coach.request.json'), 'utf8'));
  const response = policy.decide(request);
  assert.equal(response.latched, true);
  assert.deepEqual(
    response.decisions.map((d) => [d.id, d.allow, d.kind ?? null, d.rule ?? null]),
    [
      ['c1', false, 'latch', 'documentation_read'],
      ['c2', true, null, null],
      ['c3', false, 'host', 'vendor_doc_host'],
      ['c4', true, null, null],
    ],
  );
  assert.match(response.decisions[0].reason, /^Blocked by design/);
  // The same file through `load`, which resolves imports relative to it.
  assert.deepEqual(toolgate.load(join(examples, 'coach.gate')).decide(request), response);
});

test('the installed package keeps turn state in Rust: a Turn of a known id keeps its latch', () => {
  // The adapter entry point first, as an app importing only it would.
  const { Turn } = require('toolgate/adapters/turn');
  const policy = toolgate.load(join(examples, 'coach.gate'));
  const first = new Turn(policy, { stage: 'coach' }, { id: 'prompt-1' });
  first.decideOne({ id: 's', tool: 'search_aws_docs', args: { q: 'lambda' } });
  const again = new toolgate.Turn(policy, { stage: 'coach' }, { state: first.state, id: 'prompt-1' });
  assert.equal(again.decideOne({ id: 'g', tool: 'grade_attempt', args: { attempt: 'a-1', score: 1 } }).kind, 'latch');
  assert.ok(first.state instanceof toolgate.TurnState);
});

test('the installed package asks: its addon gives the approval window, its Turn keeps approvals', () => {
  const policy = toolgate.compile(`module shop
write refund
stage main { tools [refund] }
rule refunds for refund { ask when args.amount > 50 }
approvals { valid_for 5m }
`, 'shop.gate');
  assert.equal(policy.approvalWindowMs, 300000);
  assert.equal(policy.mayAsk, true);
  const turn = new toolgate.Turn(policy, { stage: 'main' });
  const call = { id: 'r', tool: 'refund', args: { amount: 100 } };
  const ask = turn.decideOne(call);
  assert.equal(ask.kind, 'ask');
  turn.approve(ask.approval);
  assert.equal(turn.decideOne(call).allow, true);
  assert.equal(turn.decideOne(call).kind, 'ask'); // used once
});
