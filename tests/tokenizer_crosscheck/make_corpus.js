// make_corpus.js — builds the real-text corpus for the tokenizer cross-check and benchmark.
//
//   node make_corpus.js OUT.json [MIN_BYTES=5242880] [GLOB_DIR=/usr/share/doc]
//
// Documents are the files GLOB_DIR/*/copyright in sorted order (each file = one document; files with
// identical contents are taken once), added until the corpus holds at least MIN_BYTES bytes of UTF-8.
// Files are decoded as UTF-8 with U+FFFD for invalid bytes (JavaScript strings cannot hold raw bytes, and
// tiktoken takes strings), so both sides tokenize exactly the same text: the UTF-8 of the written JSON.
// Writes OUT.json (a JSON array of strings) and OUT.info.json (what was used); prints the summary.
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const out = process.argv[2];
const minBytes = Number(process.argv[3] || 5 * 1024 * 1024);
const root = process.argv[4] || '/usr/share/doc';
if (!out) {
  console.error('usage: node make_corpus.js OUT.json [MIN_BYTES] [DIR]');
  process.exit(2);
}

const docs = [];
const files = [];
const seen = new Set();
let bytes = 0;
let replaced = 0;
let candidates = 0;
let dirs = [];
try { dirs = fs.readdirSync(root).sort(); } catch (e) { /* reported below */ }
const decoder = new TextDecoder('utf-8');  // non-fatal: invalid bytes -> U+FFFD
for (const d of dirs) {
  if (bytes >= minBytes) break;
  const p = path.join(root, d, 'copyright');
  let buf;
  try { buf = fs.readFileSync(p); } catch (e) { continue; }
  candidates++;
  const h = crypto.createHash('sha256').update(buf).digest('hex');
  if (seen.has(h)) continue;
  seen.add(h);
  const text = decoder.decode(buf);
  const utf8 = Buffer.byteLength(text, 'utf8');
  if (utf8 !== buf.length || !buf.equals(Buffer.from(text, 'utf8'))) replaced++;
  docs.push(text);
  files.push(p);
  bytes += utf8;
}
fs.writeFileSync(out, JSON.stringify(docs));
const info = { source: root + '/*/copyright (sorted, duplicates removed)', documents: docs.length, bytes,
               min_bytes: minBytes, enough: bytes >= minBytes, documents_with_invalid_utf8_replaced: replaced,
               first: files[0], last: files[files.length - 1] };
fs.writeFileSync(out.replace(/\.json$/, '') + '.info.json', JSON.stringify({ ...info, files }, null, 1) + '\n');
console.log('corpus: ' + JSON.stringify(info));
if (!info.enough) {
  console.log(`WARNING: only ${bytes} bytes of ${root}/*/copyright text on this machine (wanted ${minBytes}); ` +
              'the cross-check runs on what there is.');
}
if (docs.length === 0) process.exit(3);
