// crosscheck.mjs — compares vocablens' WordPiece ids (written by vocablens_tokenize_corpus) with
// transformers.js (npm @huggingface/transformers): AutoTokenizer from the local directory only (no hub),
// encode(text, {add_special_tokens: false}).
//
//   node crosscheck.mjs TOKENIZER_DIR corpus.json ids.bin   -> summary; exit 0 iff 0 documents mismatch
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const [dir, corpusPath, idsPath] = process.argv.slice(2);
const require = createRequire(path.resolve(process.env.NODE_PATH || process.cwd(), 'x.js'));
const tjsPath = require.resolve('@huggingface/transformers');
const { AutoTokenizer, env } = await import(tjsPath);
env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = path.dirname(path.resolve(dir)) + '/';
const tok = await AutoTokenizer.from_pretrained(path.basename(path.resolve(dir)), { local_files_only: true });

const docs = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));
const raw = fs.readFileSync(idsPath);
const ids = new Uint32Array(raw.buffer, raw.byteOffset, raw.length / 4);
let off = 0, mismatched = 0, tokens = 0;
const examples = [];
for (let i = 0; i < docs.length; i++) {
  if (off >= ids.length) { console.log(`ids file ends before document ${i}`); process.exit(1); }
  const n = ids[off++];
  const mine = Array.from(ids.subarray(off, off + n));
  off += n;
  const ref = tok.encode(docs[i], { add_special_tokens: false });
  tokens += ref.length;
  let k = 0;
  while (k < Math.min(ref.length, mine.length) && ref[k] === mine[k]) k++;
  if (k < Math.max(ref.length, mine.length)) {
    mismatched++;
    if (examples.length < 5) {
      examples.push({ document: i, first_difference_at_token: k,
                      transformers_js: ref.slice(k, k + 6).map((t) => `${t}:${tok.decode([t])}`),
                      vocablens: mine.slice(k, k + 6).map((t) => `${t}:${tok.decode([t])}`) });
    }
  }
}
if (off !== ids.length) { console.log('ids file has data after the last document'); process.exit(1); }
const pkg = JSON.parse(fs.readFileSync(path.join(path.dirname(tjsPath), '..', 'package.json'), 'utf8'));
console.log(`@huggingface/transformers ${pkg.version} BertTokenizer (${path.basename(dir)}) vs vocablens: ${docs.length} documents, ` +
            `${tokens} tokens, ${mismatched} mismatching documents`);
for (const e of examples) console.log('  mismatch: ' + JSON.stringify(e));
process.exit(mismatched === 0 ? 0 : 1);
