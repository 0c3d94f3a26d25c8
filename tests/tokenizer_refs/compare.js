// compare.js — compares two ids files (uint32 count + ids per text) of the same corpus.
//
//   node compare.js corpus.json A.bin B.bin LABEL_A LABEL_B [MAX_EXAMPLES=3] [EXPLAIN_CHARS]
//
// Prints one JSON line {a, b, equal, texts, examples: [...]}: texts whose ids are equal, and the first
// differing texts with context. EXPLAIN_CHARS (hex code points, "FEFF,0085"): also counts the differing
// texts that contain none of them ("unexplained"). Exit 0 (the caller decides what agreement is required);
// 1 on a broken file.
'use strict';
const fs = require('fs');
const [corpusPath, aPath, bPath, la, lb, maxEx, explain] = process.argv.slice(2);
// "NFC" in the list: texts that Unicode NFC normalization changes count as explained too.
const explainList = (explain || '').split(',').filter((x) => x);
const explainNfc = explainList.includes('NFC');
const explainChars = explainList.filter((x) => x !== 'NFC').map((h) => String.fromCodePoint(parseInt(h, 16)));
const explained = (t) => explainChars.some((c) => t.includes(c)) || (explainNfc && t.normalize('NFC') !== t);
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
let equal = 0, unexplained = 0;
const examples = [];
for (let i = 0; i < docs.length; i++) {
  const a = A[i], b = B[i];
  let k = 0;
  while (k < a.length && k < b.length && a[k] === b[k]) k++;
  if (k === a.length && k === b.length) { equal++; continue; }
  if (explainList.length && !explained(docs[i])) unexplained++;
  if (examples.length < Number(maxEx || 3))
    examples.push({ text: i, at: k, line: JSON.stringify(docs[i].slice(0, 120)), [la]: Array.from(a.subarray(k, k + 6)),
                    [lb]: Array.from(b.subarray(k, k + 6)) });
}
const res = { a: la, b: lb, equal, texts: docs.length };
if (explainList.length) res.unexplained = unexplained;
res.examples = examples;
console.log(JSON.stringify(res));
