// tjs_tokenize.js — transformers.js (npm @huggingface/transformers, pinned in package.json) on a corpus: the
// Hugging Face reference side of tests/tokenizer_refs. The tokenizer is read from local files only
// (tokenizer.json + tokenizer_config.json in DIR; remote models disabled), once for all the corpora given.
//
//   NODE_PATH=.../node_modules node tjs_tokenize.js DIR corpus.json ids.bin [corpus2.json ids2.bin ...]
//
// encode(text) with add_special_tokens (the default: BOS as the file's post-processor says); added tokens in
// the text are matched, as in Hugging Face tokenizers. ids.bin: per text uint32 count + uint32 ids (LE).
'use strict';
const fs = require('fs');
const path = require('path');
const { AutoTokenizer, env } = require('@huggingface/transformers');

async function main() {
  const [dir, ...paths] = process.argv.slice(2);
  if (!dir || paths.length === 0 || paths.length % 2 !== 0) {
    console.error('usage: node tjs_tokenize.js DIR corpus.json ids.bin [corpus2.json ids2.bin ...]');
    process.exit(2);
  }
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = path.dirname(path.resolve(dir)) + '/';
  const tok = await AutoTokenizer.from_pretrained(path.basename(path.resolve(dir)), { local_files_only: true });
  let dirp = path.dirname(require.resolve('@huggingface/transformers'));
  while (!fs.existsSync(path.join(dirp, 'package.json'))) dirp = path.dirname(dirp);
  const version = JSON.parse(fs.readFileSync(path.join(dirp, 'package.json'), 'utf8')).version;
  for (let j = 0; j < paths.length; j += 2) {
    const [corpusPath, outPath] = [paths[j], paths[j + 1]];
    const docs = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));
    const chunks = [];
    let tokens = 0;
    const t0 = process.hrtime.bigint();
    for (const d of docs) {
      const ids = tok.encode(d);
      const a = new Uint32Array(ids.length + 1);
      a[0] = ids.length;
      a.set(ids, 1);
      chunks.push(Buffer.from(a.buffer));
      tokens += ids.length;
    }
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    fs.writeFileSync(outPath, Buffer.concat(chunks));
    console.log(JSON.stringify({ texts: docs.length, tokens, encode_seconds: seconds, tokenizer: `transformers.js ${version} ${dir}`,
                                 corpus: corpusPath }));
  }
}
main().catch((e) => { console.error('tjs_tokenize: ' + (e && e.stack || e)); process.exit(1); });
