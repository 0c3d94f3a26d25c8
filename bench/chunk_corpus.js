// chunk_corpus.js — cuts every document of a corpus (JSON array of strings) into chunks of at most MAX
// UTF-16 code units at line ends (a longer single line becomes a chunk of its own), so that the chunks of a
// document concatenate back to it exactly. Used by tokenizer_bench.sh: gpt-3-encoder's encode() is
// quadratic in the length of its input (it grows its result with Array.concat), so whole 100 KB documents
// would measure that artefact, not tokenization.
//
//   node chunk_corpus.js IN.json OUT.json [MAX=1024]
'use strict';
const fs = require('fs');
const [inp, out] = process.argv.slice(2, 4);
const max = Number(process.argv[4] || 1024);
const docs = JSON.parse(fs.readFileSync(inp, 'utf8'));
const chunks = [];
for (const d of docs) {
  let cur = '';
  for (const line of d.split(/(?<=\n)/)) {  // keeps each "\n" with its line
    if (cur.length > 0 && cur.length + line.length > max) { chunks.push(cur); cur = ''; }
    cur += line;
  }
  if (cur.length > 0) chunks.push(cur);
}
if (chunks.join('') !== docs.join('')) throw new Error('chunking lost text');
fs.writeFileSync(out, JSON.stringify(chunks));
console.log(`chunks: ${chunks.length} of at most ${max} code units (longer single lines kept whole) from ${docs.length} documents`);
