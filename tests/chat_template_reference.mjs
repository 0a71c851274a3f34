// Reference renderings of chat templates by Hugging Face's JavaScript Jinja (@huggingface/jinja, the renderer
// transformers.js uses), for tests/test_chat_template.py.
//
// stdin:  JSON [{"template": str, "context": {name: JSON value}}, ...]
// stdout: JSON [{"ok": rendered str} | {"error": message}, ...], one entry per case, in order.
// Run with cwd tests/data/npm: the package is resolved from there (an ESM import would resolve from this file's
// folder, which has no node_modules). One process renders a whole batch,
// so a test session starts node once. The renderer applies trim_blocks and lstrip_blocks itself and provides
// raise_exception and strftime_now, as Transformers' environment does.
import { createRequire } from "module";
import path from "path";

const { Template } = createRequire(path.join(process.cwd(), "package.json"))("@huggingface/jinja");

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const cases = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const results = cases.map(({ template, context }) => {
  try {
    return { ok: new Template(template).render(context) };
  } catch (e) {
    return { error: String(e && e.message ? e.message : e) };
  }
});
process.stdout.write(JSON.stringify(results));
