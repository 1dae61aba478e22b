// vercel.mjs drives Toolbelt's /mcp with the Vercel AI SDK (`ai` and
// `@ai-sdk/mcp`) with its default settings, a scripted language model
// (MockLanguageModelV4 from ai/test) choosing the tool calls, and prints a
// JSON report for web/frameworks_test.go.
import { readFileSync } from 'node:fs';
import { createMCPClient } from '@ai-sdk/mcp';
import { asSchema, generateText, stepCountIs } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import {
  agentKey, agentSteps, clientName, files, finish, mcpURL, message, pushLimited, rootCombinators, step, text,
} from './common.mjs';

const version = (p) => JSON.parse(readFileSync(new URL(`../node_modules/${p}/package.json`, import.meta.url))).version;
const report = { client: 'vercel-ai', versions: { ai: version('ai'), '@ai-sdk/mcp': version('@ai-sdk/mcp') } };

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};
let callSeq = 0;

// run runs generateText with a model that plays turns: each turn gets the
// tool results the model reads in its prompt (after the last assistant
// message) and returns a tool call {tool, input} or {text}. It returns
// what the model read at each turn, and the SDK's own result.
async function run(tools, turns, options = {}) {
  const seen = [];
  let sentTools = null;
  let i = 0;
  const model = new MockLanguageModelV4({
    doGenerate: async (opts) => {
      sentTools ??= opts.tools ?? [];
      const last = opts.prompt.at(-1);
      const read = last?.role === 'tool' ? last.content.filter((p) => p.type === 'tool-result').map((p) => ({ tool: p.toolName, output: p.output })) : [];
      seen.push(read);
      const turn = turns[Math.min(i++, turns.length - 1)];
      const act = await turn(read.map((r) => text(r.output?.value ?? r.output)), read);
      const content = act.tool
        ? [{ type: 'tool-call', toolCallId: `call-${++callSeq}`, toolName: act.tool, input: JSON.stringify(act.input) }]
        : [{ type: 'text', text: act.text ?? 'done' }];
      return { content, finishReason: { unified: act.tool ? 'tool-calls' : 'stop', raw: undefined }, usage, warnings: [] };
    },
  });
  const res = await generateText({ model, tools, prompt: 'Use the tools.', stopWhen: stepCountIs(40), ...options });
  const sdk = res.steps.flatMap((s) => s.content.filter((c) => c.type === 'tool-result' || c.type === 'tool-error')).map((c) => ({
    type: c.type,
    tool: c.toolName,
    ...(c.type === 'tool-error' ? { error: message(c.error) } : { output: c.output }),
  }));
  return { seen, texts: seen.map((s) => s.map((x) => text(x.output?.value ?? x.output))), sentTools, sdk, text: res.text };
}

let client;
let tools = {};
await step(report, 'load', async () => {
  client = await createMCPClient({ transport: { type: 'http', url: mcpURL, headers: { Authorization: `Bearer ${agentKey}` } } });
  tools = await client.tools();
  const names = Object.keys(tools);
  return { protocol: client.initializeResult?.protocolVersion ?? '', server: client.serverInfo, count: names.length, names };
});

await step(report, 'schemas', async () => {
  const failed = [];
  const roots = [];
  let converted = 0;
  for (const [name, t] of Object.entries(tools)) {
    try {
      const js = await asSchema(t.inputSchema).jsonSchema;
      converted++;
      if (rootCombinators(js).some((k) => k !== 'enum')) {
        roots.push(name);
      }
    } catch (e) {
      pushLimited(failed, { name, error: message(e) });
    }
  }
  return { converted, failed, root_combinators: roots };
});

await step(report, 'safe', async () => {
  const r = await run(tools, [
    () => ({ tool: 'search_tools', input: { query: 'write a file', limit: 5 } }),
    () => ({ tool: 'file_write', input: { path: files.safe, content: `written by ${clientName}` } }),
    () => ({ tool: 'file_read', input: { path: files.safe } }),
    () => ({ text: 'done' }),
  ]);
  // What the model was offered, as the provider would get it.
  const sent = r.sentTools ?? [];
  report.schemas.sent = sent.length;
  report.schemas.sent_root_combinators = sent.filter((t) => rootCombinators(t.inputSchema).some((k) => k !== 'enum')).map((t) => t.name);
  report.schemas.find_record = sent.find((t) => t.name === 'find_record')?.inputSchema ?? null;
  return { model_saw: r.seen.slice(1).flatMap((s) => s.map((x) => text(x.output?.value ?? x.output))), sdk: r.sdk };
});

await agentSteps(report, (turns, signal) => run(tools, turns, { abortSignal: signal }));

try {
  await client?.close();
} catch (e) {
  report.close_error = message(e);
}
await finish(report);
