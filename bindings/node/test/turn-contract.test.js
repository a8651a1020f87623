'use strict';
// The turn-state contract (`turns/contract/scenarios.json`, issue 20) run against the Node
// package, the same scenarios `toolgate hook`, `/v1/hooks` (cli/tests/turn_contract.rs) and
// the Python `TurnState` run. Two drivers: `TurnState` itself, and `Turn`, the object the
// adapters use (a Turn of the step's turn id, made again at every step as an adapter would).
//
// An unseen turn id is a new turn here (`start_turn`). The state lives in the executor's
// process and is lost only with it, so scenarios that need `lose` are skipped. A policy that
// no longer declares a latch set in the turn throws `TurnError`, which the adapters answer
// as a denial.
const test = require('node:test');
const assert = require('node:assert/strict');
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const { compile, Turn, TurnState, TurnError } = require('..');
const { ROOT } = require('./helpers.js');

const CONTRACT = JSON.parse(readFileSync(join(ROOT, 'turns', 'contract', 'scenarios.json'), 'utf8'));
const POLICIES = Object.fromEntries(
  Object.entries(CONTRACT.policies).map(([name, text]) => [name, compile(text, 'contract.gate')]),
);
const SKIPPED = new Set(['lose']);
const FACTS = { stage: 'main' };

const expected = (step) => (typeof step.expect === 'string' ? step.expect : step.expect.start_turn);

/** A verdict as the contract spells it; a turn that cannot be judged is a denial. */
function verdict(judge) {
  try {
    return judge().allow ? 'allow' : 'deny';
  } catch (e) {
    if (e instanceof TurnError) return 'deny';
    throw e;
  }
}

const DRIVERS = {
  TurnState: () => {
    const state = new TurnState();
    return {
      signal: (policy, id) => state.signal(policy, id),
      call: (policy, id, tool, turn) =>
        verdict(() => state.judge(policy, { facts: FACTS, calls: [{ id, tool, args: {} }] }, turn).decisions[0]),
      post: (_policy, tool, turn) => state.recordCall(tool, true, turn),
    };
  },
  Turn: () => {
    const state = new TurnState();
    const turn = (policy, id) => new Turn(policy, FACTS, { state, id });
    return {
      signal: (policy, id) => turn(policy, id),
      call: (policy, id, tool, at) => verdict(() => turn(policy, at).decideOne({ id, tool, args: {} })),
      post: (policy, tool, at) => turn(policy, at).record(tool, true),
    };
  },
};

for (const [label, make] of Object.entries(DRIVERS)) {
  for (const scenario of CONTRACT.scenarios) {
    const missing = (scenario.needs || []).filter((n) => SKIPPED.has(n));
    test(`${label} keeps the contract: ${scenario.name}`, { skip: missing.length ? `cannot ${missing.join(', ')}` : false }, () => {
      const surface = make();
      let policy = POLICIES[CONTRACT.policy];
      scenario.steps.forEach((step, i) => {
        const at = `step ${i} ${JSON.stringify(step)}`;
        if ('signal' in step) surface.signal(policy, step.signal);
        else if ('call' in step) assert.equal(surface.call(policy, `u${i}`, step.call, step.turn), expected(step), at);
        else if ('post' in step) surface.post(policy, step.post, step.turn);
        else if ('policy' in step) policy = POLICIES[step.policy];
        else assert.fail(`unknown step ${at}`);
      });
    });
  }
}

test('the contract skips only what a process cannot lose', () => {
  const skipped = CONTRACT.scenarios.filter((s) => (s.needs || []).some((n) => SKIPPED.has(n))).map((s) => s.name);
  assert.deepEqual(skipped, ['lost_state_keeps_every_turn_latched_until_the_next_signal']);
});
