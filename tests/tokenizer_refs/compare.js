// compare.js — every comparison of the tokenizer reference check, in one process: pairs of ids files (uint32
// count + ids per text) of the same corpus.
//
//   node compare.js PLAN.jsonl RESULTS.json [MAX_EXAMPLES=3]
//
// PLAN.jsonl, one comparison a line (written by run_refs.sh):
//   {"family", "corpus", "lines": corpus.json, "a": A.bin, "b": B.bin, "la": LABEL_A, "lb": LABEL_B,
//    "required": "all" | "explained" | "info", "explain": "FEFF,0085" | "NFC" | ""}
// Per comparison: texts whose ids are equal, and the first differing texts with context. "explain" (hex code
// points, or NFC): also counts the differing texts that contain none of them ("unexplained"). Required "all":
// every text equal; "explained": every differing text explained; "info": reported only.
// Prints a table line per comparison (the result's JSON under each one that fails), writes RESULTS.json (every
// count) and exits 0 only when every required agreement holds; 1 otherwise, or on a broken file.
// One process for all (not one per comparison): each corpus is parsed once.
'use strict';
const fs = require('fs');
const [planPath, resultsPath, maxEx] = process.argv.slice(2);
if (!planPath || !resultsPath) {
  console.error('usage: node compare.js PLAN.jsonl RESULTS.json [MAX_EXAMPLES=3]');
  process.exit(2);
}

const corpora = new Map();  // path -> texts
function corpus(p) {
  if (!corpora.has(p)) corpora.set(p, JSON.parse(fs.readFileSync(p, 'utf8')));
  return corpora.get(p);
}

function read(p, docs) {
  const raw = fs.readFileSync(p);
  const v = new Uint32Array(raw.buffer, raw.byteOffset, raw.length / 4);
  const out = [];
  let off = 0;
  while (off < v.length) {
    const n = v[off++];
    out.push(v.subarray(off, off + n));
    off += n;
  }
  if (off !== v.length || out.length !== docs.length) throw new Error(`${p}: ${out.length} texts, corpus has ${docs.length}`);
  return out;
}

// One comparison: {a, b, equal, texts, [unexplained], examples}.
function compare(c) {
  const docs = corpus(c.lines);
  // "NFC" in the list: texts that Unicode NFC normalization changes count as explained too.
  const explainList = (c.explain || '').split(',').filter((x) => x);
  const explainNfc = explainList.includes('NFC');
  const explainChars = explainList.filter((x) => x !== 'NFC').map((h) => String.fromCodePoint(parseInt(h, 16)));
  const explained = (t) => explainChars.some((ch) => t.includes(ch)) || (explainNfc && t.normalize('NFC') !== t);
  const A = read(c.a, docs), B = read(c.b, docs);
  let equal = 0, unexplained = 0;
  const examples = [];
  for (let i = 0; i < docs.length; i++) {
    const a = A[i], b = B[i];
    let k = 0;
    while (k < a.length && k < b.length && a[k] === b[k]) k++;
    if (k === a.length && k === b.length) { equal++; continue; }
    if (explainList.length && !explained(docs[i])) unexplained++;
    if (examples.length < Number(maxEx || 3))
      examples.push({ text: i, at: k, line: JSON.stringify(docs[i].slice(0, 120)), [c.la]: Array.from(a.subarray(k, k + 6)),
                      [c.lb]: Array.from(b.subarray(k, k + 6)) });
  }
  const res = { a: c.la, b: c.lb, equal, texts: docs.length };
  if (explainList.length) res.unexplained = unexplained;
  res.examples = examples;
  return res;
}

const plan = fs.readFileSync(planPath, 'utf8').trim().split('\n').filter((l) => l).map((l) => JSON.parse(l));
const results = [];
let bad = 0;
for (const c of plan) {
  let r;
  try {
    r = compare(c);
  } catch (e) {
    console.log(`compare failed: ${c.family} ${c.corpus} ${c.la} vs ${c.lb}: ${e.message}`);
    bad = 1;
    continue;
  }
  results.push({ family: c.family, corpus: c.corpus, required: c.required, result: r });
  const all = r.equal === r.texts;
  const ok = c.required === 'all' ? all : c.required === 'explained' ? (all || r.unexplained === 0) : true;
  const count = String(r.texts) + (r.unexplained !== undefined ? ` (unexplained ${r.unexplained})` : '');
  console.log(`  ${c.family.padEnd(10)} ${c.corpus.padEnd(10)} ${c.la.padEnd(16)} vs ${c.lb.padEnd(12)} ` +
              `${String(r.equal).padStart(6)} / ${count.padEnd(6)} ${ok ? `ok (${c.required})` : `FAILED (${c.required})`}`);
  if (!ok) {
    bad = 1;
    console.log(`    ${JSON.stringify(r)}`.slice(0, 1500));
  }
}
fs.writeFileSync(resultsPath, JSON.stringify(results, null, 1) + '\n');
if (plan.length === 0) { console.log(`${planPath}: no comparisons`); bad = 1; }
process.exit(bad);
