'use strict';
// docs/integration.md shows the adapter examples in full; CI runs the files (npm test), so
// the text in the docs must be the files' text. The `Turn` section's snippet runs as it stands.
const test = require('node:test');
const assert = require('node:assert/strict');
const { readFileSync } = require('node:fs');
const { execFileSync } = require('node:child_process');
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

test('docs/integration.md\'s Turn and TurnState snippet runs as it stands', () => {
  const section = docs.slice(docs.indexOf('### Per-turn state: `Turn` and `TurnState`'));
  const start = section.indexOf('```js\n') + '```js\n'.length;
  assert.ok(start > '```js\n'.length, 'no js block in the Turn section');
  const code = section.slice(start, section.indexOf('\n```\n', start) + 1);
  // Run inside the package, where `require('toolgate')` is the package itself.
  execFileSync(process.execPath, ['-e', code], { cwd: join(__dirname, '..'), stdio: 'pipe' });
});
