'use strict';
// docs/integration.md shows the adapter examples in full; CI runs the files (npm test), so
// the text in the docs must be the files' text.
const test = require('node:test');
const assert = require('node:assert/strict');
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const { ROOT } = require('./helpers.js');

const docs = readFileSync(join(ROOT, 'docs', 'integration.md'), 'utf8');

for (const file of ['examples/ai_sdk.js', 'examples/mcp_client.js']) {
  test(`docs/integration.md shows bindings/node/${file} as it is`, () => {
    const marker = `<!-- bindings/node/${file} -->\n\`\`\`js\n`;
    const at = docs.indexOf(marker);
    assert.notEqual(at, -1, `no ${marker.trim()} block in docs/integration.md`);
    const start = at + marker.length;
    const shown = docs.slice(start, docs.indexOf('\n```\n', start) + 1);
    assert.equal(shown, readFileSync(join(__dirname, '..', file), 'utf8'));
  });
}
