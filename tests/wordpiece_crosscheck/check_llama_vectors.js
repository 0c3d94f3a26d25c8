// check_llama_vectors.js — vocablens' ids for llama.cpp's BERT test vectors against the expected ids in
// models/ggml-vocab-bert-bge.gguf.out (one line of space-separated ids per input; written by llama.cpp's
// tests/test-tokenizer-0.py with Hugging Face tokenizers, add_special_tokens=False).
//
//   node check_llama_vectors.js vectors.json ids.bin ggml-vocab-bert-bge.gguf.out
'use strict';
const fs = require('fs');
const [corpusPath, idsPath, outPath] = process.argv.slice(2);
const docs = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));
const lines = fs.readFileSync(outPath, 'utf8').split('\n');
const raw = fs.readFileSync(idsPath);
const ids = new Uint32Array(raw.buffer, raw.byteOffset, raw.length / 4);
let off = 0, bad = 0;
for (let i = 0; i < docs.length; i++) {
  const n = ids[off++];
  const mine = Array.from(ids.subarray(off, off + n)).join(' ');
  off += n;
  const ref = (lines[i] || '').trim().split(/\s+/).filter((s) => s.length).join(' ');
  if (mine !== ref) {
    bad++;
    console.log(`  mismatch on vector ${i} ${JSON.stringify(docs[i]).slice(0, 60)}: expected [${ref}] got [${mine}]`);
  }
}
console.log(`llama.cpp ggml-vocab-bert-bge test vectors vs vocablens: ${docs.length} texts, ${bad} mismatching`);
process.exit(bad === 0 ? 0 : 1);
