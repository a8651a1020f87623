// The coach loop of source document 001, with toolgate in-process (the `toolgate` package).
//
// A port of the coach part of examples/typescript/agent_loop.ts, which asks `toolgate serve`
// over HTTP: here the executor compiles the policy itself and keeps the conversation's turn
// state in a TurnState, one Turn per user message. A scripted stand-in model emits the attack: `[grade_attempt, search_aws_docs]` in
// one batch, then a look-alike documentation host. Every model turn the executor offers the
// tools the policy allows (`policy.offer`) and judges the batch before dispatching anything
// (`turn.decide`); refusals go back to the model as tool results. Exits 1 on any mismatch.
//
// Run: node examples/coach_loop.js (after `npm install` in bindings/node)
'use strict';

const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const { load, Turn, TurnState } = require('..');

const ROOT = join(__dirname, '..', '..', '..');
const policy = load(join(ROOT, 'stdlib-rules', 'examples', 'coach.gate'));
const tools = JSON.parse(readFileSync(join(ROOT, 'examples', 'tools', 'coach.tools.json'), 'utf8'));
const failures = [];
const conversation = new TurnState(); // the session: its turns, their latches, what ran

function check(ok, what) {
  if (!ok) {
    console.log('  MISMATCH:', what);
    failures.push(what);
  }
}

// One user turn: offer, let the model act, judge, dispatch, until the model replies.
// expect[i] lists [tool, deny kind or null] for the model's i-th batch.
function userTurn(user, facts, model, expect) {
  console.log('user:', user);
  const turn = new Turn(policy, facts, { state: conversation }); // a new user message: no latch set
  let results = [];
  for (let batchNo = 0; batchNo < 6; batchNo++) {
    const offer = policy.offer({ facts: turn.currentFacts(), tools });
    console.log('  offer:', offer.tools.map((t) => t.name).join(', ') || '(none)',
      '| disabled:', offer.disabled.map((d) => d.name).join(', ') || '(none)');
    const action = model(offer.tools, results);
    if (typeof action === 'string') {
      console.log('  model replies:', action);
      check(batchNo === expect.length, `replied after ${batchNo} batches`);
      return action;
    }
    const decisions = turn.decide(action);
    const want = expect[batchNo] ?? [];
    check(want.length === action.length, `batch ${batchNo}: ${action.length} calls`);
    results = action.map((call, i) => {
      const d = decisions[i];
      const [tool, kind] = want[i] ?? ['?', null];
      console.log(`  model calls ${call.tool} ${JSON.stringify(call.args)} ->`,
        d.allow ? 'allowed' : `refused (${d.kind}): ${d.reason}`);
      check(call.tool === tool && (d.kind ?? null) === kind && d.allow === (kind === null),
        `${call.tool}: ${d.kind}, expected ${kind}`);
      if (d.allow) turn.record(call.tool, true); // dispatched; the tool succeeded
      return { tool: call.tool, ok: d.allow, content: d.reason ?? `${call.tool} done` };
    });
  }
  check(false, 'the model never replied');
  return '';
}

const call = (id, tool, args) => ({ id, tool, args });
const desc = (offered, name) => offered.find((t) => t.name === name)?.description ?? '';

console.log('== document 001: [grade_attempt, search_aws_docs] in one batch ==');
const steps = [
  [call('g1', 'grade_attempt', { attempt: 'a-1', score: 1 }), call('s1', 'search_aws_docs', { q: 'lambda limits' })],
  [call('f1', 'fetch_vendor_doc', { url: 'https://docs.aws.amazon.com.evil.tld/lambda' })],
];
const reply = userTurn("What are Lambda's limits? And grade attempt a-1.", { stage: 'coach' },
  (offered, res) => desc(offered, 'update_memory').startsWith('DISABLED FOR THIS TURN') && res.length === 1
    ? 'Grading is off for this turn by design: please send your attempt again.'
    : steps.shift() ?? 'Done.',
  [[['grade_attempt', 'latch'], ['search_aws_docs', null]], [['fetch_vendor_doc', 'host']]]);
check(reply.startsWith('Grading is off'), `reply: ${reply}`);
const graded = userTurn('Here is attempt a-1 again.', { stage: 'coach' },
  (_offered, res) => res.length ? 'Graded.' : [call('g2', 'grade_attempt', { attempt: 'a-1', score: 1 })],
  [[['grade_attempt', null]]]);
check(graded === 'Graded.', `reply: ${graded}`);

console.log(failures.length ? `\ncoach_loop.js: ${failures.length} mismatches` : '\ncoach_loop.js: every decision as expected');
process.exit(failures.length ? 1 : 0);
