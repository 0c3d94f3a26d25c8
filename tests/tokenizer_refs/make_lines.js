// make_lines.js — the texts of the tokenizer reference check: every distinct line (with its "\n") of the
// cross-check corpora (tests/tokenizer_crosscheck/make_corpus.js: /usr/share/doc/*/copyright, and
// make_synthetic_corpus.js: random Unicode of many scripts, spaces, controls), in order of first appearance.
//
//   node make_lines.js OUT.json IN.json [IN2.json ...]
'use strict';
const fs = require('fs');
const [out, ...inputs] = process.argv.slice(2);
const seen = new Set();
const lines = [];
for (const p of inputs) {
  for (const doc of JSON.parse(fs.readFileSync(p, 'utf8'))) {
    const parts = doc.split('\n');
    parts.forEach((l, k) => {
      const t = k + 1 < parts.length ? l + '\n' : l;
      if (t.trim().length === 0 && t.length < 2) return;  // empty lines: nothing to compare
      if (seen.has(t)) return;
      seen.add(t);
      lines.push(t);
    });
  }
}
fs.writeFileSync(out, JSON.stringify(lines));
console.log(`lines: ${lines.length} distinct lines, ${Buffer.byteLength(lines.join(''))} bytes from ${inputs.join(', ')}`);
