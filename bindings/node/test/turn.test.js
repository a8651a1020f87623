'use strict';
// The turn contract of `Turn` and `TurnState`: the Rust turn model (`toolgate-turns`) every
// surface shares, through the real addon. Each test is a way the latch could be lost.
const test = require('node:test');
const assert = require('node:assert/strict');
const toolgate = require('..');
const { compile, load, Turn, TurnState, TurnError, RequestError } = toolgate;
const { example } = require('./helpers.js');

const coach = load(example('coach').path);
const FACTS = { stage: 'coach' };
const GRADE_ARGS = { attempt: 'a-1', score: 1 };
const search = (id = 's') => ({ id, tool: 'search_aws_docs', args: { q: 'lambda' } });
const grade = (id = 'g') => ({ id, tool: 'grade_attempt', args: GRADE_ARGS });
const lookup = (id = 'l') => ({ id, tool: 'lookup_lesson', args: { id: 'l1' } });

// Two revisions of one module: the second renamed the latch (a reload, a rewrite).
const SHOP = `module shop
write refund
ingest web_fetch
stage main { tools [refund, web_fetch] }
`;
const shop = compile(`${SHOP}latch untrusted { set_by ingest  blocks write }\n`, 'shop.gate');
const shopRenamed = compile(`${SHOP}latch tainted { set_by ingest  blocks write }\n`, 'shop.gate');
const fetch = { id: 'f', tool: 'web_fetch', args: { url: 'https://example.com' } };
const refund = { id: 'r', tool: 'refund', args: { amount: 20 } };

test('a Turn made again for a known turn id is that turn, latches and all', () => {
  const first = new Turn(coach, FACTS, { id: 'prompt-1' });
  first.decideOne(search());
  // A late or repeated new-turn event of prompt-1 (the adapter makes its Turn again).
  const again = new Turn(coach, FACTS, { state: first.state, id: 'prompt-1' });
  assert.equal(again.latched, true);
  assert.equal(again.decideOne(grade()).kind, 'latch');
  assert.equal(first.state.turns, 1);
});

test('an older turn id arriving between two calls does not clear the current turn\'s latch', () => {
  const state = new TurnState();
  const a = new Turn(coach, FACTS, { state, id: 'chat-a' });
  const b = new Turn(coach, FACTS, { state, id: 'chat-b' });
  // Chat A reads documentation, chat B makes one call, then chat A's write comes.
  a.decideOne(search('s1'));
  b.decideOne(lookup('l1'));
  assert.equal(a.decideOne(grade('g1')).kind, 'latch');
  // The other way round: B is latched, a call of the older A falls between B's calls.
  b.decideOne(search('s2'));
  assert.equal(a.decideOne(lookup('l2')).allow, true);
  assert.equal(b.decideOne(grade('g2')).kind, 'latch');
  // The same through TurnState alone: each id is judged with its own turn's latches.
  const judge = (call, turn) => state.judge(coach, { facts: FACTS, calls: [call] }, turn).decisions[0];
  assert.equal(judge(grade('g3'), 'chat-a').kind, 'latch');
  assert.equal(judge(grade('g4'), 'chat-c').allow, true); // an id never seen: a new turn
  assert.equal(state.turns, 3);
});

test('the executor\'s facts.latched is kept: a Turn carried on from a latched batch stays latched', () => {
  const turn = new Turn(coach, { stage: 'coach', latched: true });
  assert.equal(turn.latched, true);
  assert.equal(turn.decideOne(grade()).kind, 'latch');
  assert.equal(turn.currentFacts().latched, true);
});

test('a turn\'s latch cannot be cleared by assigning to it', () => {
  const turn = new Turn(coach, FACTS);
  turn.decideOne(search());
  assert.throws(() => { turn.latched = false; }, TypeError);
  assert.equal(turn.decideOne(grade()).kind, 'latch');
});

test('a late post-event of an earlier turn is dated by that turn and resets nothing', () => {
  const bank = compile(`module bank
read verify_identity
write modify_booking
ingest web_fetch
stage main { tools [verify_identity, modify_booking, web_fetch] }
latch untrusted { set_by ingest  blocks write }
rule fresh_identity for modify_booking { require called_within(verify_identity, turns: 1) }
`, 'bank.gate');
  const facts = { stage: 'main' };
  const verify = { id: 'v', tool: 'verify_identity', args: {} };
  const modify = { id: 'm', tool: 'modify_booking', args: {} };
  const first = new Turn(bank, facts, { id: 'msg-1' });
  assert.equal(first.decideOne(verify).allow, true);
  const second = first.next(); // the user's next message, while verify_identity still runs
  second.decideOne({ id: 'w', tool: 'web_fetch', args: {} });
  first.record('verify_identity', true); // its post-event arrives now
  assert.equal(second.latched, true);
  assert.deepEqual(second.called, []);
  assert.deepEqual(first.called, [{ tool: 'verify_identity', ok: true }]);
  assert.deepEqual(first.state.called, [{ tool: 'verify_identity', ok: true, turns_ago: 1 }]);
  // Dated in msg-1, so two turns old in the third message: too old for `turns: 1`.
  const third = second.next();
  assert.equal(third.decideOne(modify).kind, 'precondition');
  third.decideOne(verify);
  third.record('verify_identity', true);
  assert.equal(third.decideOne({ ...modify, id: 'm2' }).allow, true);
});

test('a set latch the policy no longer declares denies the turn until the next one', () => {
  const first = new Turn(shop, { stage: 'main' }, { id: 'm1' });
  first.decideOne(fetch);
  const reloaded = new Turn(shopRenamed, { stage: 'main' }, { state: first.state, id: 'm1' });
  assert.throws(() => reloaded.decideOne(refund), (e) => {
    assert.ok(e instanceof TurnError);
    assert.equal(e.name, 'TurnError');
    assert.equal(e.kind, 'policy_changed');
    assert.match(e.message, /latch `untrusted` is set in this turn but the policy judging it/);
    return true;
  });
  // The user's next message is judged by the new policy alone.
  assert.equal(reloaded.next().decideOne(refund).allow, true);
});

test('a latched turn pushed out of the kept turns is still latched when it comes back', () => {
  const state = new TurnState();
  new Turn(coach, FACTS, { state, id: 'old' }).decideOne(search());
  for (let i = 0; i < 20; i++) new Turn(coach, FACTS, { state, id: `t${i}` }).decideOne(lookup());
  const back = new Turn(coach, FACTS, { state, id: 'old' });
  assert.equal(state.turns, 21); // the late signal of `old` started nothing
  assert.equal(back.decideOne(grade()).kind, 'latch');
});

test('a verdict kept for a model message answers only its own call, once, and never after a latch', () => {
  const turn = new Turn(coach, FACTS);
  turn.decide([lookup('call_0'), grade('call_1')], { batch: 'm1' });
  assert.equal(turn.batchDecision('call_1', 'grade_attempt', GRADE_ARGS, 'm1').allow, true);
  assert.equal(turn.batchDecision('call_1', 'grade_attempt', GRADE_ARGS, 'm1'), null); // once
  assert.equal(turn.batchDecision('call_0', 'grade_attempt', GRADE_ARGS, 'm1'), null); // another tool
  assert.equal(turn.batchDecision('call_0', 'lookup_lesson', { id: 'l2' }, 'm1'), null); // other args
  assert.equal(turn.batchDecision('call_0', 'lookup_lesson', '{"id": "l1", "id": "l2"}', 'm1'), null);
  assert.equal(turn.batchDecision('call_0', 'lookup_lesson', { id: 'l1' }, 'm2'), null); // another message
  // The next model message numbers its calls from 0 again, and reads documentation.
  const m2 = turn.decide([search('call_0'), grade('call_1')], { batch: 'm2' });
  assert.deepEqual(m2.map((d) => d.allow), [true, false]);
  assert.equal(turn.batchDecision('call_0', 'lookup_lesson', { id: 'l1' }, 'm1'), null); // dropped
  assert.equal(turn.batchDecision('call_1', 'grade_attempt', GRADE_ARGS).kind, 'latch'); // the last batch
  assert.equal(turn.batchDecision(undefined, 'grade_attempt', GRADE_ARGS), null);
});

test('every kept verdict is dropped as soon as a judgement sets a latch', () => {
  const turn = new Turn(coach, FACTS);
  turn.decide([lookup('c0'), grade('c1')], { batch: 'm1' });
  turn.decideOne(search('c9')); // judged alone, after the message: the turn is latched now
  assert.equal(turn.batchDecision('c1', 'grade_attempt', GRADE_ARGS, 'm1'), null);
  // Judging m1 again is judging it anew, with the latch.
  assert.equal(turn.decide([lookup('c0'), grade('c1')], { batch: 'm1' })[1].kind, 'latch');
});

test('TurnState: one session, turns known by id, calls dated by their turn', () => {
  const state = new TurnState();
  const main = { stage: 'main' };
  state.signal(shop, 'msg-1');
  state.judge(shop, { facts: main, calls: [fetch] }, 'msg-1');
  state.recordCall('web_fetch', true, 'msg-1');
  assert.equal(state.judge(shop, { facts: main, calls: [refund] }, 'msg-1').decisions[0].kind, 'latch');
  assert.deepEqual(state.recorded(shop, 'msg-1'), [{ tool: 'web_fetch', ok: true }]);
  state.signal(shop, 'msg-2');
  assert.equal(state.judge(shop, { facts: main, calls: [refund] }, 'msg-2').decisions[0].allow, true);
  assert.equal(state.judge(shop, JSON.stringify({ facts: main, calls: [refund], turn: 'msg-1' }))
    .decisions[0].kind, 'latch'); // the request's own `turn`
  state.signal(shop, 'msg-1'); // a late signal of a known turn: no change
  assert.equal(state.latches(shop, 'msg-2'), false);
  assert.equal(state.latches(shop, 'msg-1'), true);
  assert.equal(state.latched, false);
  assert.equal(state.turns, 2);
  assert.deepEqual(state.called, [{ tool: 'web_fetch', ok: true, turns_ago: 1 }]);
  assert.deepEqual(state.recorded(shop, 'msg-9'), []);
  // A batch judged whole, answered call by call.
  state.judge(shop, { facts: main, calls: [refund, fetch] }, 'msg-2', 'm7');
  assert.equal(state.decision(shop, 'r', 'refund', { amount: 20 }, 'msg-2', 'm7').kind, 'latch');
  assert.equal(state.decision(shop, 'f', 'web_fetch', '{"url":"https://example.com"}', 'msg-2', 'm7').allow, true);
  assert.equal(state.decision(shop, 'r', 'refund', { amount: 20 }, 'msg-1', 'm7'), null); // another turn
});

test('TurnState errors: typed, with the field or the kind, and the state unchanged', () => {
  const state = new TurnState();
  assert.throws(() => state.judge(coach, { facts: FACTS, calls: [{ id: 'x', tool: 1, args: {} }] }, 't'), (e) => {
    assert.ok(e instanceof RequestError);
    assert.equal(e.field, 'calls[0].tool');
    return true;
  });
  assert.throws(() => state.judge(coach, '{"calls": [], "calls": []}'), RequestError);
  assert.throws(() => state.judge(coach, { calls: [], policy: 'shop' }), RequestError);
  assert.equal(state.turns, 0);
  assert.throws(() => state.judge({}, { calls: [] }), /a policy is a toolgate Policy/);
  assert.throws(() => new Turn(null), /a policy is a toolgate Policy/);
  assert.throws(() => new Turn(coach, FACTS, { state: {} }), /state is a toolgate TurnState/);
  assert.equal(state.decision(coach, 'x', 't', 'not json'), null);
  const e = new TurnError('m', 'too_many_turns');
  assert.ok(e instanceof Error);
  assert.equal(e.kind, 'too_many_turns');
});

test('a Turn of a session of its own is the old per-message Turn', () => {
  const turn = new Turn(coach, { stage: 'coach', called: [{ tool: 'lookup_lesson', ok: true, turns_ago: 2 }] });
  assert.equal(turn.state instanceof TurnState, true);
  assert.equal(typeof turn.id, 'string');
  assert.equal(turn.policy, coach);
  const [g, s] = turn.decide([grade('g1'), search('s1')]);
  assert.deepEqual([g.kind, s.allow], ['latch', true]);
  turn.record('search_aws_docs', true);
  assert.deepEqual(turn.currentFacts(), {
    stage: 'coach',
    latched: true,
    called: [{ tool: 'lookup_lesson', ok: true, turns_ago: 2 }, { tool: 'search_aws_docs', ok: true, turns_ago: 0 }],
  });
  assert.deepEqual(turn.history(), [
    { tool: 'lookup_lesson', ok: true, turns_ago: 3 },
    { tool: 'search_aws_docs', ok: true, turns_ago: 1 },
  ]);
  // A new Turn is a new session: no latch.
  assert.equal(new Turn(coach, FACTS).decideOne(grade()).allow, true);
});
