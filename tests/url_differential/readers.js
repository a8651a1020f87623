// Reads URLs (one JSON string per line) on stdin; writes, per URL, one JSON object with the
// host each Node reader names: the WHATWG `new URL()` and the legacy `url.parse`. Hosts are
// lowercase as the readers give them (both give an internationalised name in punycode). A
// reader that rejects the URL gives {"error": "..."}.
'use strict';
const url = require('url');
const readline = require('readline');

process.removeAllListeners('warning'); // url.parse's deprecation notice is not an answer

function read(reader, u) {
  try {
    const host = reader(u);
    if (host === null || host === undefined || host === '') return { error: 'no host' };
    return { host: host.toLowerCase() };
  } catch (e) {
    return { error: String(e && e.message ? e.message : e) };
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
rl.on('line', (line) => {
  const u = JSON.parse(line);
  out.push(JSON.stringify({
    whatwg: read((s) => new URL(s).hostname, u),
    legacy: read((s) => url.parse(s).hostname, u),
  }));
});
rl.on('close', () => process.stdout.write(out.join('\n') + (out.length ? '\n' : '')));
