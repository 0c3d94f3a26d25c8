// compare.js — compares two ids files (uint32 count + ids per text) of the same corpus.
//
//   node compare.js corpus.json A.bin B.bin LABEL_A LABEL_B [MAX_EXAMPLES=3]
//
// Prints one JSON line {a, b, equal, texts, examples: [...]}: texts whose ids are equal, and the first
// differing texts with context. Exit 0 (the caller decides what agreement is required); 1 on a broken file.
'use strict';
const fs = require('fs');
const [corpusPath, aPath, bPath, la, lb, maxEx] = process.argv.slice(2);
const docs = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));
function read(p) {
  const raw = fs.readFileSync(p);
  const v = new Uint32Array(raw.buffer, raw.byteOffset, raw.length / 4);
  const out = [];
  let off = 0;
  while (off < v.length) {
    const n = v[off++];
    out.push(v.subarray(off, off + n));
    off += n;
  }
  if (off !== v.length || out.length !== docs.length) {
    console.log(JSON.stringify({ error: `${p}: ${out.length} texts, corpus has ${docs.length}` }));
    process.exit(1);
  }
  return out;
}
const A = read(aPath), B = read(bPath);
let equal = 0;
const examples = [];
for (let i = 0; i < docs.length; i++) {
  const a = A[i], b = B[i];
  let k = 0;
  while (k < a.length && k < b.length && a[k] === b[k]) k++;
  if (k === a.length && k === b.length) { equal++; continue; }
  if (examples.length < Number(maxEx || 3))
    examples.push({ text: i, at: k, line: JSON.stringify(docs[i].slice(0, 120)), [la]: Array.from(a.subarray(k, k + 6)),
                    [lb]: Array.from(b.subarray(k, k + 6)) });
}
console.log(JSON.stringify({ a: la, b: lb, equal, texts: docs.length, examples }));
