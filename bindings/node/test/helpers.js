'use strict';
const { readFileSync } = require('node:fs');
const { join } = require('node:path');

const ROOT = join(__dirname, '..', '..', '..');
const EXAMPLES = join(ROOT, 'stdlib-rules', 'examples');

/** The shipped example policy `name` (stdlib-rules/examples/NAME.gate), its path and text. */
function example(name) {
  const path = join(EXAMPLES, `${name}.gate`);
  return { path, text: readFileSync(path, 'utf8') };
}

/** The coach policy's batch of 4 (stdlib-rules/examples/coach.request.json). */
const COACH_BATCH = JSON.parse(readFileSync(join(EXAMPLES, 'coach.request.json'), 'utf8'));

module.exports = { ROOT, EXAMPLES, example, COACH_BATCH };
