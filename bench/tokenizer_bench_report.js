// tokenizer_bench_report.js — turns the JSON lines of tokenizer_bench.sh into the markdown table of
// docs/benchmarks.md (tokens/s and vocablens' speed-up over each other implementation).
//
//   node bench/tokenizer_bench_report.js results.jsonl
'use strict';
const fs = require('fs');
const rows = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const fmt = (x) => (x / 1e6).toFixed(2) + ' M';
const out = [];
for (const input of [...new Set(rows.map((r) => r.input))]) {
  const rs = rows.filter((r) => r.input === input);
  const vl = rs.find((r) => r.impl === 'vocablens');
  out.push(`**${input}** (${rs[0].documents} inputs, ${(rs[0].bytes / 1e6).toFixed(2)} MB, ${rs[0].tokens} tokens)`);
  out.push('');
  out.push('| implementation | tokens/s | vocablens speed-up |');
  out.push('| --- | ---: | ---: |');
  for (const r of rs) {
    const ratio = r.impl === 'vocablens' ? '1.00x' : (vl.tokens_per_s / r.tokens_per_s).toFixed(2) + 'x';
    const name = r.impl === 'vocablens' ? 'vocablens (cold word cache)' : r.impl.startsWith('gpt-3') ? 'gpt-3-encoder (JS, cold cache)' : r.impl;
    out.push(`| ${name} | ${fmt(r.tokens_per_s)} | ${ratio} |`);
    if (r.impl === 'vocablens') out.push(`| vocablens (warm word cache) | ${fmt(r.warm_tokens_per_s)} | |`);
    if (r.impl.startsWith('gpt-3') && r.warm_tokens_per_s) out.push(`| gpt-3-encoder (JS, warm cache) | ${fmt(r.warm_tokens_per_s)} | ${(vl.tokens_per_s / r.warm_tokens_per_s).toFixed(2)}x |`);
  }
  out.push('');
}
console.log(out.join('\n'));
