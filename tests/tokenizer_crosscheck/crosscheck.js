// crosscheck.js — compares vocablens' GPT-2 ids (written by tokenize_corpus) with @dqbd/tiktoken's
// "gpt2" encoding (OpenAI tiktoken's Rust core compiled to WebAssembly; encode_ordinary = plain BPE,
// <|endoftext|> as ordinary text, like vocablens' default).
//
//   node crosscheck.js corpus.json ids.bin     -> prints a summary; exit 0 iff 0 documents mismatch
'use strict';
const fs = require('fs');
const path = require('path');
const { get_encoding } = require('@dqbd/tiktoken');

const [corpusPath, idsPath] = process.argv.slice(2);
const docs = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));
const raw = fs.readFileSync(idsPath);
const ids = new Uint32Array(raw.buffer, raw.byteOffset, raw.length / 4);
const enc = get_encoding('gpt2');

let off = 0, mismatched = 0, tokens = 0;
const examples = [];
for (let i = 0; i < docs.length; i++) {
  if (off >= ids.length) { console.log(`ids file ends before document ${i}`); process.exit(1); }
  const n = ids[off++];
  const mine = ids.subarray(off, off + n);
  off += n;
  const ref = enc.encode_ordinary(docs[i]);
  tokens += ref.length;
  let same = ref.length === mine.length;
  let k = 0;
  while (k < Math.min(ref.length, mine.length) && ref[k] === mine[k]) k++;
  if (k < Math.max(ref.length, mine.length)) same = false;
  if (!same) {
    mismatched++;
    if (examples.length < 5) {
      const prefix = new TextDecoder().decode(enc.decode(ref.subarray(0, k)));
      examples.push({ document: i, first_difference_at_token: k, context: JSON.stringify(prefix.slice(-40) + docs[i].slice(prefix.length, prefix.length + 40)),
                      tiktoken: Array.from(ref.subarray(k, k + 8)), vocablens: Array.from(mine.subarray(k, k + 8)) });
    }
  }
}
enc.free();
if (off !== ids.length) { console.log(`ids file has data after the last document`); process.exit(1); }
const pkg = JSON.parse(fs.readFileSync(path.join(path.dirname(require.resolve('@dqbd/tiktoken')), 'package.json'), 'utf8'));
console.log(`@dqbd/tiktoken ${pkg.version} gpt2 vs vocablens: ${docs.length} documents, ${tokens} tokens, ` +
            `${mismatched} mismatching documents`);
for (const e of examples) console.log('  mismatch: ' + JSON.stringify(e));
process.exit(mismatched === 0 ? 0 : 1);
