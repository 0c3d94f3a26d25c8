// make_vectors_corpus.js — llama.cpp's tokenizer test inputs (models/ggml-vocab-*.gguf.inp: texts separated by
// "\n__ggml_vocab_test__\n") as a corpus.json array, in file order.
//
//   node make_vectors_corpus.js ggml-vocab-bert-bge.gguf.inp OUT.json
'use strict';
const fs = require('fs');
const [inp, out] = process.argv.slice(2);
const texts = fs.readFileSync(inp, 'utf8').split('\n__ggml_vocab_test__\n');
if (texts.length && texts[texts.length - 1] === '') texts.pop();
fs.writeFileSync(out, JSON.stringify(texts));
console.log(`llama.cpp test vectors: ${texts.length} texts from ${inp}`);
