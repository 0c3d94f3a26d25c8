// make_synthetic_corpus.js — a deterministic random-Unicode stress corpus for the tiktoken cross-check:
// letters, marks and digits of many scripts, emoji, CJK, fullwidth forms, every kind of space (U+0085,
// U+00A0, U+180E, U+2028, U+3000, U+FEFF, ...), C0/C1 controls, contractions and CR LF, mixed at random.
// Only blocks assigned long before Unicode 14 are used, so engines with different Unicode versions
// (PCRE2 10.42: 14.0; tiktoken's Rust regex: 15.x) classify every character the same way.
//
//   node make_synthetic_corpus.js OUT.json [DOCUMENTS=400]
'use strict';
const fs = require('fs');
const out = process.argv[2];
const ndocs = Number(process.argv[3] || 400);
let seed = 12345;  // a fixed xorshift32: the same corpus on every machine
const rnd = () => {
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
};
const pick = (a) => a[Math.floor(rnd() * a.length)];
const ranges = [[0x20, 0x7e], [0xa0, 0x24f], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x6ff],
                [0x900, 0x97f], [0xe00, 0xe7f], [0x1100, 0x11ff], [0x2000, 0x206f], [0x2070, 0x209f],
                [0x2150, 0x218f], [0x2460, 0x24ff], [0x3000, 0x303f], [0x3040, 0x30ff], [0x4e00, 0x4e80],
                [0xac00, 0xac80], [0xfe00, 0xfe0f], [0xff00, 0xffef], [0x1f300, 0x1f64f], [0x1d400, 0x1d7ff],
                [0x10330, 0x1034f], [0x0, 0x1f], [0x80, 0x9f]];
const extras = [' ', '  ', '\n', '\t', "'s", "'ll", "'D", '\u0085', '\ufeff', '\u180e', '\u00a0', '\u3000',
                '\u2028', '123', '\u0660\u0661', '\u216b', '\u00bd', '\r\n', '<|endoftext|>'];
const docs = [];
for (let d = 0; d < ndocs; d++) {
  let s = '';
  const n = 200 + Math.floor(rnd() * 3000);
  while (s.length < n) {
    if (rnd() < 0.3) { s += pick(extras); continue; }
    const r = pick(ranges);
    const cp = r[0] + Math.floor(rnd() * (r[1] - r[0] + 1));
    s += String.fromCodePoint(cp);
  }
  docs.push(s);
}
fs.writeFileSync(out, JSON.stringify(docs));
console.log(`synthetic corpus: ${docs.length} documents, ${Buffer.byteLength(JSON.stringify(docs))} bytes of JSON`);
