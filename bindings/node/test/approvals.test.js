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
