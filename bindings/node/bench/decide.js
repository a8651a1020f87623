// Per-call cost of `policy.decide` for the coach policy's batch of 4, from an object and
// from JSON text, in-process. A measurement to report, not a test: nothing here asserts a
// time. Run: node bench/decide.js [iterations]
'use strict';

const { load } = require('..');
const { example, COACH_BATCH: request } = require('../test/helpers.js');

const policy = load(example('coach').path);
const text = JSON.stringify(request);
const n = Number(process.argv[2] ?? 200000);

function time(label, fn) {
  for (let i = 0; i < n / 10; i++) fn(); // warm up
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) fn();
  const ns = Number(process.hrtime.bigint() - start) / n;
  console.log(`${label.padEnd(44)} ${(ns / 1000).toFixed(2).padStart(7)} µs per batch of 4`);
}

time('decide(object)', () => policy.decide(request));
time('decide(JSON.stringify(object))', () => policy.decide(JSON.stringify(request)));
time('decide(text) (text already in hand)', () => policy.decide(text));
time('JSON.stringify(object) alone', () => JSON.stringify(request));
time('policy.name (the floor: one Node-API call)', () => policy.name);
const small = JSON.stringify({ facts: { stage: 'coach' }, calls: [request.calls[3]] });
time('decideText(one read call) (no JSON.parse)', () => policy.decideText(small));
