// Reference tokenizations from Hugging Face's JavaScript tokenizers (@huggingface/tokenizers, pinned in
// tests/data/npm/package.json) for tests/tokenizer_data.py.  Run with cwd tests/data/npm so the package resolves.
//
// stdin:  {"jobs": [{"tokenizer": path, "config": path | null, "texts": [str], "decode": [[int]]}]}
// stdout: {"jobs": [{"error": str | null,
//                    "texts": [{"ids": [int], "ids_plain": [int], "tokens": [str],
//                               "decode": str, "decode_skip": str, "decode_plain": str, "decode_plain_skip": str}
//                              | {"error": str}],
//                    "decode": [{"text": str, "text_skip": str} | {"error": str}]}]}
// "ids" = encode(text) with special tokens, "ids_plain" without; "tokens" = tokenize(text) (no special tokens);
// "decode*" decode "ids"/"ids_plain" with skip_special_tokens false/true.  Decoding never applies
// clean_up_tokenization_spaces: Rust tokenizers' decode (what habana_assist's engine follows) has no such step,
// Transformers applies it on top.  An empty id list decodes to "" (the JS decode refuses one; Rust returns "").
// All jobs run in this one process, so a test session pays Node's start-up once.
import { createRequire } from "module";
import fs from "fs";
import path from "path";

// Resolved from cwd (tests/data/npm): an ESM import would resolve from this file's folder, which has no
// node_modules.  The CommonJS build is the same code as the ESM one.
const { Tokenizer } = createRequire(path.join(process.cwd(), "package.json"))("@huggingface/tokenizers");

function readStdin() {
  return fs.readFileSync(0, "utf8");
}

function decode(tok, ids, skip) {
  if (ids.length === 0) return "";
  return tok.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
}

function runJob(job) {
  let tok;
  try {
    const json = JSON.parse(fs.readFileSync(job.tokenizer, "utf8"));
    const config = job.config ? JSON.parse(fs.readFileSync(job.config, "utf8")) : {};
    tok = new Tokenizer(json, config);
  } catch (e) {
    return { error: String(e && e.stack ? e.stack : e), texts: [], decode: [] };
  }
  const texts = (job.texts ?? []).map((text) => {
    try {
      const ids = tok.encode(text, { add_special_tokens: true }).ids;
      const ids_plain = tok.encode(text, { add_special_tokens: false }).ids;
      return {
        ids,
        ids_plain,
        tokens: tok.tokenize(text, { add_special_tokens: false }),
        decode: decode(tok, ids, false),
        decode_skip: decode(tok, ids, true),
        decode_plain: decode(tok, ids_plain, false),
        decode_plain_skip: decode(tok, ids_plain, true),
      };
    } catch (e) {
      return { error: String(e && e.stack ? e.stack : e) };
    }
  });
  const decoded = (job.decode ?? []).map((ids) => {
    try {
      return { text: decode(tok, ids, false), text_skip: decode(tok, ids, true) };
    } catch (e) {
      return { error: String(e && e.stack ? e.stack : e) };
    }
  });
  return { error: null, texts, decode: decoded };
}

const request = JSON.parse(readStdin());
const out = { jobs: request.jobs.map(runJob) };
process.stdout.write(JSON.stringify(out));
