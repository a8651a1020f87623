'use strict';
// Budgets over batches in the in-process TurnState (issue 26): `per turn` and `per session`
// counts in the session's state, `per principal` and `per tenant` counts shared by every
// TurnState of the process, through the real addon.
const test = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { compile, TurnState, RequestError } = require('..');

const shop = compile(`module shop
write refund, send
ingest fetch
stage main { tools [refund, send, fetch] }
latch tainted { set_by [fetch] blocks [send] }
budget refunds for refund { sum args.amount <= 100 per session }
budget sends for send { count <= 2 per turn }
`, 'shop.gate');

const DAILY = `module daily
write refund
stage main { tools [refund] }
budget daily for refund { count <= 3 within 24h per principal }
`;
const daily = compile(DAILY, 'daily.gate');

// A principal no other test uses: the process's book is shared by every test.
const who = () => `p-${randomUUID()}`;

function batch(calls, principal) {
  const facts = { stage: 'main' };
  if (principal !== undefined) facts.principal = { sub: principal, tenant: 'acme' };
  return { facts, calls: calls.map(([tool, args], i) => ({ id: `c${i}`, tool, args })) };
}

const allowed = (response) => response.decisions.map((d) => d.allow);

test('a session\'s sum spans batches and the denial says what is left', () => {
  const state = new TurnState();
  for (let i = 0; i < 2; i++) {
    const response = state.judge(shop, batch([['refund', { amount: 40 }]]));
    assert.deepEqual(allowed(response), [true]);
    assert.deepEqual(response.spent, { refunds: 40 });
  }
  const [third] = state.judge(shop, batch([['refund', { amount: 40 }]])).decisions;
  assert.deepEqual([third.allow, third.kind, third.rule], [false, 'budget', 'refunds']);
  assert.match(third.reason, /20 of 100 left per session/);
  assert.deepEqual(allowed(new TurnState().judge(shop, batch([['refund', { amount: 40 }]]))), [true]);
});

test('a turn\'s count starts again in a new turn', () => {
  const state = new TurnState();
  const sends = [['send', {}], ['send', {}], ['send', {}]];
  assert.deepEqual(allowed(state.judge(shop, batch(sends), 't1')), [true, true, false]);
  assert.deepEqual(allowed(state.judge(shop, batch(sends), 't2')), [true, true, false]);
  assert.deepEqual(allowed(state.judge(shop, batch([['send', {}]]), 't1')), [false]);
});

test('a principal\'s count is shared by two TurnStates and not by another principal', () => {
  const [ana, ben] = [who(), who()];
  const [one, two] = [new TurnState(), new TurnState()];
  const refund = ['refund', { amount: 1 }];
  assert.deepEqual(allowed(one.judge(daily, batch([refund, refund], ana))), [true, true]);
  assert.deepEqual(allowed(two.judge(daily, batch([refund, refund], ana))), [true, false]);
  const [denied] = two.judge(daily, batch([refund], ana)).decisions;
  assert.equal(denied.kind, 'budget');
  assert.match(denied.reason, /0 of 3 left per principal;/);
  assert.deepEqual(allowed(two.judge(daily, batch([refund], ben))), [true]);
});

test('concurrent async tasks of one principal never exceed the limit', async () => {
  const dee = who();
  const states = [new TurnState(), new TurnState(), new TurnState()];
  const ran = await Promise.all(Array.from({ length: 12 }, async (_, i) => {
    await new Promise((resolve) => setImmediate(resolve));
    const response = states[i % 3].judge(daily, batch([['refund', {}], ['refund', {}]], dee));
    return allowed(response).filter(Boolean).length;
  }));
  assert.equal(ran.reduce((a, b) => a + b, 0), 3);
});

test('a non-number amount is denied and consumes nothing', () => {
  const state = new TurnState();
  const response = state.judge(shop, batch([['refund', { amount: '40' }], ['refund', {}]]));
  assert.deepEqual(response.decisions.map((d) => [d.allow, d.kind]), [[false, 'budget'], [false, 'budget']]);
  assert.deepEqual(allowed(state.judge(shop, batch([['refund', { amount: 100 }]]))), [true]);
});

test('a principal\'s budget without a principal denies', () => {
  const [d] = new TurnState().judge(daily, batch([['refund', {}]])).decisions;
  assert.deepEqual([d.allow, d.kind, d.rule], [false, 'budget', 'daily']);
  assert.match(d.reason, /not known/);
});

test('a batch judged again, or blocked by the turn\'s latch, consumes nothing', () => {
  const state = new TurnState();
  const refunds = [['refund', { amount: 50 }], ['refund', { amount: 50 }]];
  for (let i = 0; i < 3; i++) {
    assert.deepEqual(allowed(state.judge(shop, batch(refunds), 't1', 'm1')), [true, true]);
  }
  state.judge(shop, batch([['fetch', {}]]), 't2');
  assert.equal(state.judge(shop, batch([['send', {}]]), 't2').decisions[0].kind, 'latch');
  assert.deepEqual(allowed(state.judge(shop, batch([['send', {}], ['send', {}]]), 't3')), [true, true]);
});

test('a request cannot bring its own counts', () => {
  const request = batch([['refund', { amount: 1 }]]);
  request.facts.spent = { refunds: 0 };
  assert.throws(() => new TurnState().judge(shop, request), (e) => e instanceof RequestError && e.field === 'facts.spent');
});

test('worker threads of one process share a principal\'s count and never exceed the limit', async () => {
  const { Worker } = require('node:worker_threads');
  const dee = who();
  const source = `
    const { parentPort, workerData } = require('node:worker_threads');
    const { compile, TurnState } = require(workerData.pkg);
    const daily = compile(workerData.policy, 'daily.gate');
    const state = new TurnState();
    let ran = 0;
    for (let i = 0; i < 3; i++) {
      const calls = [{ id: 'a', tool: 'refund', args: {} }, { id: 'b', tool: 'refund', args: {} }];
      const response = state.judge(daily, { facts: { stage: 'main', principal: { sub: workerData.sub } }, calls });
      ran += response.decisions.filter((d) => d.allow).length;
    }
    parentPort.postMessage(ran);
  `;
  const policy = DAILY;
  const pkg = require.resolve('..');
  const ran = await Promise.all(Array.from({ length: 4 }, () => new Promise((resolve, reject) => {
    const worker = new Worker(source, { eval: true, workerData: { pkg, policy, sub: dee } });
    worker.once('message', resolve);
    worker.once('error', reject);
  })));
  assert.equal(ran.reduce((a, b) => a + b, 0), 3, `${ran}`);
});

test('a judgement no call runs on counts nothing', () => {
  const state = new TurnState();
  const refund = batch([['refund', { amount: 60 }]]);
  for (let i = 0; i < 3; i++) {
    assert.deepEqual(allowed(state.judge(shop, refund, undefined, 'm1', { spend: false })), [true]);
  }
  assert.equal(state.decision(shop, 'c0', 'refund', { amount: 60 }, undefined, 'm1'), null);
  assert.deepEqual(allowed(state.judge(shop, refund)), [true]);
  assert.deepEqual(allowed(state.judge(shop, refund)), [false]);
});
