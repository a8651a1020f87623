'use strict';
// Asking a person (issue 24) through the addon and the adapters' Turn: the policy's approval
// window, and the Turn as the keeper of approvals (expiry by an injected monotonic clock,
// single use, dropped with the turn, rejection).
const test = require('node:test');
const assert = require('node:assert/strict');
const { compile, load, Turn, TurnState } = require('..');
const { example } = require('./helpers.js');

const REFUNDS = `module refunds
write refund
ingest fetch
read look
stage main { tools [refund, fetch, look] }
latch tainted { set_by [fetch] asks [look] }
rule refunds for refund {
  require args.amount is number and args.amount <= 500
  ask when args.amount > 50
}
`;
const refunds = compile(REFUNDS, 'refunds.gate');
const quick = compile(`${REFUNDS}approvals { valid_for 1s }\n`, 'refunds.gate');
const FACTS = { stage: 'main' };
const refund = (amount, id = 'r') => ({ id, tool: 'refund', args: { amount } });

/** A clock the test moves: `clock()` is the time in ms, `clock.tick(ms)` moves it on. */
function manualClock(start = 1000) {
  let now = start;
  const clock = () => now;
  clock.tick = (ms) => { now += ms; };
  return clock;
}

test('the addon gives the policy\'s approval window in ms and whether it may ask', () => {
  assert.equal(refunds.approvalWindowMs, 10 * 60 * 1000); // none set: ten minutes
  assert.equal(quick.approvalWindowMs, 1000);
  assert.equal(compile(`${REFUNDS}approvals { valid_for 5m }\n`, 'r.gate').approvalWindowMs, 300000);
  assert.equal(refunds.mayAsk, true);
  assert.equal(load(example('coach').path).mayAsk, false);
});

test('an ask carries a digest; once approved, that call is allowed once and asks again after', () => {
  const turn = new Turn(refunds, FACTS);
  const ask = turn.decideOne(refund(100));
  assert.equal(ask.allow, false);
  assert.equal(ask.kind, 'ask');
  assert.equal(ask.rule, 'refunds');
  assert.match(ask.reason, /^Approval needed/);
  assert.match(ask.approval, /^ap1:[0-9a-f]{64}$/);
  turn.approve(ask.approval);
  assert.deepEqual(turn.approvals, [ask.approval]);
  assert.deepEqual(turn.currentFacts().approvals, [ask.approval]);
  const allowed = turn.decideOne(refund(100, 'r2'));
  assert.equal(allowed.allow, true);
  assert.equal(allowed.approval, ask.approval);
  assert.deepEqual(turn.approvals, []); // used: single use
  const again = turn.decideOne(refund(100, 'r3'));
  assert.equal(again.kind, 'ask');
  assert.equal(again.approval, ask.approval); // the same call: the same digest, asked again
  assert.equal(turn.decideOne(refund(20)).allow, true); // no ask: no approval needed
});

test('an approval older than the policy\'s window is dropped and the call asks again', () => {
  const clock = manualClock();
  const turn = new Turn(quick, FACTS, { clock });
  const { approval } = turn.decideOne(refund(100));
  turn.approve(approval);
  clock.tick(999);
  assert.equal(turn.decide([refund(100)], { spend: false })[0].allow, true); // still live at 999 ms
  clock.tick(1);
  assert.deepEqual(turn.approvals, []); // 1 s old: valid_for 1s is over
  const late = turn.decideOne(refund(100));
  assert.equal(late.kind, 'ask');
  // Approved anew, it is stamped anew.
  turn.approve(approval);
  assert.equal(turn.decideOne(refund(100)).allow, true);
});

test('the default window is the policy\'s ten minutes, on a monotonic clock by default', () => {
  const clock = manualClock();
  const turn = new Turn(refunds, FACTS, { clock });
  turn.approve(turn.decideOne(refund(100)).approval);
  clock.tick(10 * 60 * 1000 - 1);
  assert.equal(turn.approvals.length, 1);
  clock.tick(1);
  assert.equal(turn.approvals.length, 0);
  // Without an injected clock a fresh approval is live.
  const real = new Turn(refunds, FACTS);
  real.approve(real.decideOne(refund(100)).approval);
  assert.equal(real.decideOne(refund(100)).allow, true);
});

test('a clock that does not give a finite time lets no approval count (fails closed)', () => {
  let now = 0;
  const turn = new Turn(refunds, FACTS, { clock: () => now });
  turn.approve(turn.decideOne(refund(100)).approval);
  now = NaN;
  assert.equal(turn.decideOne(refund(100)).kind, 'ask');
  assert.throws(() => new Turn(refunds, FACTS, { clock: 5 }), /clock is a function/);
  now = Number.POSITIVE_INFINITY;
  assert.throws(() => turn.approve('ap1:' + '0'.repeat(64)), /clock gave no finite time/);
});

test('an approval for other arguments, another tool or another turn does not allow', () => {
  const state = new TurnState();
  const turn = new Turn(refunds, FACTS, { state, id: 't1' });
  const { approval } = turn.decideOne(refund(100));
  turn.approve(approval);
  const other = turn.decideOne(refund(101));
  assert.equal(other.kind, 'ask');
  assert.notEqual(other.approval, approval);
  assert.deepEqual(turn.approvals, [approval]); // not used by the other call
  // Another turn of the same session, handed the digest: the digest binds the turn.
  const elsewhere = new Turn(refunds, FACTS, { state, id: 't2' });
  elsewhere.approve(approval);
  assert.equal(elsewhere.decideOne(refund(100)).kind, 'ask');
  // The call it was asked for is still allowed, once.
  assert.equal(turn.decideOne(refund(100)).allow, true);
});

test('a new turn drops the approvals; so does a Turn made again for the same id', () => {
  const turn = new Turn(refunds, FACTS, { id: 'm1' });
  const { approval } = turn.decideOne(refund(100));
  turn.approve(approval);
  const next = turn.next();
  assert.deepEqual(next.approvals, []);
  assert.equal(next.decideOne(refund(100)).kind, 'ask');
  const remade = new Turn(refunds, FACTS, { state: turn.state, id: 'm1' });
  assert.deepEqual(remade.approvals, []);
  assert.equal(remade.decideOne(refund(100)).kind, 'ask');
});

test('reject withdraws an approval before it is used', () => {
  const turn = new Turn(refunds, FACTS);
  const { approval } = turn.decideOne(refund(100));
  turn.approve(approval);
  assert.equal(turn.reject(approval), true);
  assert.equal(turn.reject(approval), false); // nothing left to withdraw
  assert.equal(turn.decideOne(refund(100)).kind, 'ask');
});

test('approve takes only an approval digest', () => {
  const turn = new Turn(refunds, FACTS);
  for (const bad of ['ap1:xyz', 'ap1:' + 'A'.repeat(64), 'ap2:' + '0'.repeat(64), 42, null, undefined]) {
    assert.throws(() => turn.approve(bad), TypeError, String(bad));
  }
  assert.deepEqual(turn.approvals, []);
});

test('in one batch one approval lets one call run; the judgement that allowed spends it', () => {
  const turn = new Turn(refunds, FACTS);
  turn.approve(turn.decideOne(refund(100)).approval);
  const [a, b] = turn.decide([refund(100, 'a'), refund(100, 'b')]);
  assert.equal(a.allow, true);
  assert.equal(b.kind, 'ask');
  assert.deepEqual(turn.approvals, []);
});

test('a judgement with spend: false allows without using the approval; the next one uses it', () => {
  const turn = new Turn(refunds, FACTS);
  const { approval } = turn.decideOne(refund(100));
  turn.approve(approval);
  assert.equal(turn.decide([refund(100)], { spend: false })[0].allow, true);
  assert.deepEqual(turn.approvals, [approval]);
  assert.equal(turn.decideOne(refund(100)).allow, true);
  assert.equal(turn.decideOne(refund(100)).kind, 'ask');
});

test('a latch that asks: the approval is bound to the latch\'s ask, and the latch stays set', () => {
  const turn = new Turn(refunds, FACTS);
  turn.decideOne({ id: 'f', tool: 'fetch', args: {} });
  const ask = turn.decideOne({ id: 'l', tool: 'look', args: { q: 1 } });
  assert.equal(ask.kind, 'ask');
  assert.equal(ask.rule, 'tainted');
  turn.approve(ask.approval);
  assert.equal(turn.decideOne({ id: 'l2', tool: 'look', args: { q: 1 } }).allow, true);
  assert.equal(turn.latched, true);
});

test('approvals in the facts a Turn is made with are kept approvals: timed and used once', () => {
  const probe = new Turn(refunds, FACTS, { id: 'm1' });
  const { approval } = probe.decideOne(refund(100));
  const clock = manualClock();
  const turn = new Turn(quick, { ...FACTS, approvals: [approval] }, { id: 'm1', clock });
  // Another policy revision: the digest from `refunds` does not fit `quick`'s asks.
  assert.equal(turn.decideOne(refund(100)).kind, 'ask');
  const same = new Turn(refunds, { ...FACTS, approvals: [approval] }, { id: 'm1', clock });
  assert.deepEqual(same.approvals, [approval]);
  assert.equal(same.decideOne(refund(100)).allow, true);
  assert.equal(same.decideOne(refund(100)).kind, 'ask');
  assert.throws(() => new Turn(refunds, { ...FACTS, approvals: ['nope'] }), TypeError);
});
