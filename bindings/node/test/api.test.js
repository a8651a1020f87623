'use strict';
// The package API: compile, load, decide (object and text), offer, explain, and the typed
// errors. Every expectation comes from the shipped coach policy (source document 001).
const test = require('node:test');
const assert = require('node:assert/strict');
const { mkdtempSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const toolgate = require('..');
const { compile, load, CompileError, RequestError } = toolgate;
const { example, COACH_BATCH } = require('./helpers.js');

const coach = () => load(example('coach').path);
const BATCH = COACH_BATCH;

test('decide judges a batch from an object: the latch pre-scan and the host allowlist', () => {
  const response = coach().decide(BATCH);
  assert.equal(response.policy, 'coach');
  assert.equal(response.latched, true);
  assert.deepEqual(
    response.decisions.map((d) => [d.id, d.allow, d.kind ?? null]),
    [['c1', false, 'latch'], ['c2', true, null], ['c3', false, 'host'], ['c4', true, null]],
  );
  assert.match(response.decisions[0].reason, /Blocked by design/);
  assert.equal(response.decisions[0].rule, 'documentation_read');
});

test('decide gives the same response for the JSON text as for the object', () => {
  const policy = coach();
  assert.deepEqual(policy.decide(JSON.stringify(BATCH)), policy.decide(BATCH));
  assert.deepEqual(JSON.parse(policy.decideText(BATCH)), policy.decide(BATCH));
});

test('a denial is a result, never an exception', () => {
  const response = coach().decide({
    facts: { stage: 'intake' },
    calls: [{ id: 'x', tool: 'not_a_tool', args: {} }],
  });
  assert.equal(response.decisions[0].allow, false);
  assert.equal(response.decisions[0].kind, 'unclassified');
});

test('the latch state carried in blocks a write in the next batch of the turn', () => {
  const policy = coach();
  const first = policy.decide({ facts: { stage: 'coach' }, calls: [BATCH.calls[1]] });
  const next = policy.decide({ facts: { stage: 'coach', latched: first.latched }, calls: [BATCH.calls[0]] });
  assert.equal(next.decisions[0].kind, 'latch');
});

test('name, revision and warnings describe the compiled policy', () => {
  const policy = coach();
  assert.equal(policy.name, 'coach');
  assert.match(policy.revision, /^[0-9a-f]{16,}$/);
  assert.deepEqual(policy.warnings, []);
  const edited = compile(example('coach').text + '\n// edited\n', 'coach.gate');
  assert.notEqual(edited.revision, policy.revision);
});

test('a policy that does not compile throws CompileError with rendered and structured diagnostics', () => {
  const source = 'module demo\nwrite send_email\nstage main { tools [send_emial] }\n';
  let error;
  try {
    compile(source, 'demo.gate');
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof CompileError, `got ${error}`);
  assert.ok(error instanceof Error);
  assert.match(error.message, /^demo\.gate:3:\d+: error: /m);
  assert.match(error.message, /\^/);
  const d = error.diagnostics.find((x) => x.severity === 'error');
  assert.ok(error.diagnostics.some((x) => x.severity === 'warning')); // found alongside
  assert.equal(d.severity, 'error');
  assert.equal(d.file, 'demo.gate');
  assert.equal(d.line, 3);
  assert.equal(d.column, source.split('\n')[2].indexOf('send_emial') + 1);
  assert.match(d.message, /send_emial/);
  assert.match(d.help, /send_email/);
});

test('compile resolves stdlib imports only; load resolves file imports relative to the file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'toolgate-node-'));
  writeFileSync(join(dir, 'limits.gate'),
    'module limits\nrule small for pay { require args.amount is number and args.amount <= 10 }\n');
  const main = 'module shop\nwrite pay\nstage s { tools [pay] }\nuse "limits.gate"\n';
  writeFileSync(join(dir, 'shop.gate'), main);

  const policy = load(join(dir, 'shop.gate'));
  const decide = (amount) => policy.decide({
    facts: { stage: 's' }, calls: [{ id: 'p', tool: 'pay', args: { amount } }],
  }).decisions[0];
  assert.equal(decide(5).allow, true);
  assert.equal(decide(50).kind, 'args');

  assert.throws(() => compile(main, join(dir, 'shop.gate')), (e) => {
    assert.ok(e instanceof CompileError);
    assert.match(e.message, /limits\.gate/);
    return true;
  });
  assert.doesNotThrow(() => compile('module m\nwrite w\ningest i\nstage s { tools [w, i] }\nuse stdlib::untrusted_content_latch\n'));
});

test('load of a missing file throws a plain Error naming the file', () => {
  assert.throws(() => load('/nonexistent/x.gate'), (e) => {
    assert.ok(!(e instanceof CompileError));
    assert.match(e.message, /cannot read `\/nonexistent\/x\.gate`/);
    return true;
  });
});

function requestError(fn) {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof RequestError, `expected RequestError, got ${e && e.stack}`);
    return e;
  }
  assert.fail('no error thrown');
}

test('a malformed request object names the field, like the Rust RequestError', () => {
  const e = requestError(() => coach().decide({ facts: { stage: 'coach' }, calls: [{ id: 'a', args: {} }] }));
  assert.equal(e.field, 'calls[0].tool');
  assert.match(e.message, /^request field `calls\[0\]\.tool`: /);
  const latch = requestError(() => coach().decide({ facts: { latched: { documentaton_read: true } }, calls: [] }));
  assert.match(latch.message, /documentation_read/); // did you mean
});

test('a call with the model API\'s own keys is refused, not judged without its arguments', () => {
  // Every object of a request is closed: `arguments` used to be ignored, the call judged
  // with no arguments at all.
  for (const [call, field, meant] of [
    [{ id: 'a', tool: 'update_memory', arguments: { note: 'x' } }, 'calls[0].arguments', 'args'],
    [{ id: 'a', tool: 'update_memory', input: { note: 'x' } }, 'calls[0].input', 'args'],
    [{ id: 'a', name: 'update_memory', args: {} }, 'calls[0].name', 'tool'],
  ]) {
    const request = { facts: { stage: 'coach' }, calls: [call] };
    for (const form of [request, JSON.stringify(request)]) {
      const e = requestError(() => coach().decide(form));
      assert.equal(e.field, field);
      assert.ok(e.message.includes(`did you mean \`${meant}\`?`), e.message);
    }
  }
});

test('a request string with a key given twice is refused with its path', () => {
  const text = '{"facts":{"stage":"coach"},"calls":[{"id":"a","tool":"grade_attempt","tool":"get_learner_state","args":{}}]}';
  const e = requestError(() => coach().decide(text));
  assert.equal(e.field, 'calls[0].tool');
  assert.match(e.message, /twice/);
});

test('text that is not JSON, and a request for another policy, are request errors', () => {
  const e = requestError(() => coach().decide('{"calls": ['));
  assert.equal(e.field, null);
  assert.match(e.message, /line 1, column/);
  const other = requestError(() => coach().decide({ policy: 'payments', calls: [] }));
  assert.match(other.message, /policy `payments`/);
});

test('values JSON cannot carry are refused, not dropped or nulled: functions, NaN, undefined in a list', () => {
  const call = (x) => ({ facts: { stage: 'coach' }, calls: [{ id: 'a', tool: 'lookup_lesson', args: { x } }] });
  for (const bad of [() => 1, NaN, Infinity, Symbol('s'), [undefined]]) {
    const e = requestError(() => coach().decide(call(bad)));
    assert.match(e.message, /^request is not JSON data: /);
  }
  const cyclic = { id: 'a', tool: 'lookup_lesson', args: {} };
  cyclic.args.self = cyclic;
  requestError(() => coach().decide({ facts: { stage: 'coach' }, calls: [cyclic] }));
  // A property set to undefined is absent, as in JSON.stringify.
  assert.deepEqual(coach().decide(call(undefined)), coach().decide(JSON.stringify(call(undefined))));
});

test('hostile nesting is an error, not a crash', () => {
  let deep = {};
  for (let i = 0; i < 100000; i++) deep = { d: deep };
  requestError(() => coach().decide({ facts: { stage: 'coach' }, calls: [{ id: 'a', tool: 'lookup_lesson', args: deep }] }));
  const text = `{"facts":{"stage":"coach"},"calls":[{"id":"a","tool":"lookup_lesson","args":${'['.repeat(100000)}${']'.repeat(100000)}}]}`;
  requestError(() => coach().decide(text));
});

test('offer shows the stage tools and marks the writes a set latch disables', () => {
  const tools = ['update_memory', 'search_aws_docs', 'lookup_lesson', 'delete_everything']
    .map((name) => ({ name, description: `${name} tool` }));
  const policy = coach();
  const offer = policy.offer({ facts: { stage: 'coach', latched: true }, tools });
  assert.deepEqual(offer.tools.map((t) => t.name), ['update_memory', 'search_aws_docs', 'lookup_lesson']);
  assert.deepEqual(offer.disabled.map((d) => d.name), ['update_memory']);
  assert.match(offer.tools[0].description, /^DISABLED FOR THIS TURN/);
  assert.deepEqual(offer.withheld.map((w) => w.name), ['delete_everything']);
  assert.deepEqual(policy.offer(JSON.stringify({ facts: { stage: 'coach', latched: true }, tools })), offer);
  const e = requestError(() => policy.offer({ facts: { stage: 'coach' } }));
  assert.equal(e.field, 'tools');
});

test('explain returns the decision decide makes, with the checks that ran', () => {
  const policy = coach();
  const explained = policy.explain(BATCH);
  assert.deepEqual(explained.map((x) => x.decision), policy.decide(BATCH).decisions);
  const host = explained[2].steps.at(-1);
  assert.equal(host.passed, false);
  assert.match(host.check, /vendor_doc_host/);
  assert.match(host.detail, /evil\.tld/);
});

test('a Turn dates the calls it records this turn, so called_within rules can pass', () => {
  const { Turn } = toolgate;
  const policy = compile(
    'module bank\nread verify_identity\nwrite modify_booking\n' +
      'stage main { tools [verify_identity, modify_booking] }\n' +
      'rule fresh_identity for modify_booking { require called_within(verify_identity, turns: 1) }\n',
  );
  // The executor's history from earlier turns keeps its ages: two turns old is too old.
  const turn = new Turn(policy, {
    stage: 'main',
    called: [{ tool: 'verify_identity', ok: true, turns_ago: 2 }],
  });
  const call = { id: 'c1', tool: 'modify_booking', args: {} };
  assert.equal(turn.decideOne(call).allow, false);
  turn.record('verify_identity', true);
  assert.equal(turn.decideOne({ ...call, id: 'c2' }).allow, true);

  // Carried into the next turn, the call is a turn old: history() ages every entry.
  const history = turn.history();
  assert.deepEqual(history, [
    { tool: 'verify_identity', ok: true, turns_ago: 3 },
    { tool: 'verify_identity', ok: true, turns_ago: 1 },
  ]);
  assert.equal(new Turn(policy, { stage: 'main', called: history }).decideOne(call).allow, false);
  // `called` copied as it is carries the calls undated, never as this turn's: denied.
  assert.deepEqual(turn.called.at(-1), { tool: 'verify_identity', ok: true });
  assert.equal(new Turn(policy, { stage: 'main', called: turn.called }).decideOne(call).allow, false);
});
