// make_vectors.js — llama.cpp's tokenizer test vectors (models/ggml-vocab-NAME.gguf.inp / .out, written by its
// convert_hf_to_gguf_update.py with Hugging Face's Python tokenizers: encode(text, add_special_tokens=False))
// as a corpus and an ids file for compare.js.
//
//   node make_vectors.js NAME.gguf.inp NAME.gguf.out texts.json expected.bin
'use strict';
const fs = require('fs');
const [inp, outp, textsPath, idsPath] = process.argv.slice(2);
const sep = '\n__ggml_vocab_test__\n';
const raw = fs.readFileSync(inp, 'utf8');
const texts = [];
let pos = 0;
while (pos < raw.length) {  // as llama.cpp's tests/test-tokenizer-0.cpp reads them
  const next = raw.indexOf(sep, pos);
  if (next < 0) { texts.push(raw.slice(pos)); break; }
  texts.push(raw.slice(pos, next));
  pos = next + sep.length;
}
const lines = fs.readFileSync(outp, 'utf8').split('\n');
if (lines.length && lines[lines.length - 1] === '') lines.pop();
if (lines.length !== texts.length) {
  console.error(`${inp}: ${texts.length} texts but ${outp} has ${lines.length} lines`);
  process.exit(1);
}
const chunks = lines.map((l) => {
  const ids = l.trim() === '' ? [] : l.trim().split(/\s+/).map(Number);
  return Buffer.from(new Uint32Array([ids.length, ...ids]).buffer);
});
fs.writeFileSync(textsPath, JSON.stringify(texts));
fs.writeFileSync(idsPath, Buffer.concat(chunks));
console.log(`${texts.length} test vectors from ${inp}`);
