// tokenizer_bench.js — the node side of the tokenizer benchmark (run by bench/tokenizer_bench.sh).
//
//   NODE_PATH=tests/tokenizer_crosscheck/node_modules node bench/tokenizer_bench.js corpus.json [REPEATS=3] [--no-gpt3]
//
// Single thread, documents encoded one by one, like bench_tokenizer does:
//  - @dqbd/tiktoken (OpenAI tiktoken's Rust core in WebAssembly), encoding "gpt2", encode_ordinary;
//    no word cache, so every repeat measures the same work; best of REPEATS.
//  - gpt-3-encoder (pure JavaScript); it keeps a global word cache, so the first pass is "cold" (the
//    figure compared) and a second pass "warm".
// Prints one JSON line per implementation. --no-gpt3 skips gpt-3-encoder (for whole documents, where its
// quadratic Array.concat takes many minutes).
'use strict';
const fs = require('fs');
const { get_encoding } = require('@dqbd/tiktoken');
const gpt3 = require('gpt-3-encoder');

const docs = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const repeats = Math.max(1, Number(process.argv[3] || 3));
const withGpt3 = !process.argv.includes('--no-gpt3');
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d, 'utf8'), 0);
const now = () => Number(process.hrtime.bigint()) / 1e9;

function timed(encode) {
  const t0 = now();
  let tokens = 0;
  for (const d of docs) tokens += encode(d).length;
  return { seconds: now() - t0, tokens };
}

const enc = get_encoding('gpt2');
let best = null;
for (let r = 0; r < repeats; r++) {
  const t = timed((d) => enc.encode_ordinary(d));
  if (!best || t.seconds < best.seconds) best = t;
}
enc.free();
console.log(JSON.stringify({ impl: '@dqbd/tiktoken (WASM)', documents: docs.length, bytes, tokens: best.tokens,
                             repeats, seconds: best.seconds, tokens_per_s: best.tokens / best.seconds }));

if (!withGpt3) process.exit(0);
const cold = timed((d) => gpt3.encode(d));
const warm = timed((d) => gpt3.encode(d));
console.log(JSON.stringify({ impl: 'gpt-3-encoder (JS)', documents: docs.length, bytes, tokens: cold.tokens,
                             seconds: cold.seconds, tokens_per_s: cold.tokens / cold.seconds,
                             warm_seconds: warm.seconds, warm_tokens_per_s: warm.tokens / warm.seconds }));
