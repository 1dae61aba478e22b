// sdk.mjs drives Toolbelt's /mcp with an official MCP TypeScript SDK
// client, as an MCP host would, and prints a JSON report for
// web/frameworks_test.go. Its argument picks the SDK and how the client
// negotiates: "v1" (@modelcontextprotocol/sdk), "v2-auto"
// (@modelcontextprotocol/client probing for 2026-07-28 with server/discover,
// falling back to initialize), "v2-pinned" (pinned to 2026-07-28) or "v2"
// (@modelcontextprotocol/client as constructed, whose default mode is
// "legacy").
//
// There is no model here: the steps call the tools directly, as a host
// does for its model, and "model_saw" is the text the host would hand it.
// Every schema is compiled with the SDK's own validator (Ajv), the one it
// uses for tool output schemas. The cancelled call asks for progress
// (onprogress), so the server holds it open, and is aborted with an
// AbortSignal once the server reports it waits for a reviewer.
import { readFileSync } from 'node:fs';
import {
  abortRunning, agentKey, approvalOfCall, approve, callIDIn, clientName, files, finish, mcpURL, message, pendingApproval,
  pushLimited, rootCombinators, slowTool, step, text, until, wire,
} from './common.mjs';

const variant = process.argv[2] ?? 'v1';
const version = (p) => JSON.parse(readFileSync(new URL(`../node_modules/${p}/package.json`, import.meta.url))).version;
const headers = { Authorization: `Bearer ${agentKey}` };

let client;
let transport;
let validator;
let callTool;
const report = {
  client: { v1: 'sdk-v1', 'v2-auto': 'sdk-v2 (auto)', 'v2-pinned': 'sdk-v2 (pinned to 2026-07-28)', v2: 'sdk-v2 (default mode: legacy)' }[variant] ?? variant,
};
if (variant === 'v1') {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const { CallToolResultSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const { AjvJsonSchemaValidator } = await import('@modelcontextprotocol/sdk/validation/ajv');
  report.versions = { '@modelcontextprotocol/sdk': version('@modelcontextprotocol/sdk') };
  client = new Client({ name: 'toolbelt-sdk-v1', version: '1.0.0' });
  transport = new StreamableHTTPClientTransport(new URL(mcpURL), { requestInit: { headers } });
  validator = new AjvJsonSchemaValidator();
  callTool = (params, options) => client.callTool(params, CallToolResultSchema, options);
} else {
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const { AjvJsonSchemaValidator } = await import('@modelcontextprotocol/client/validators/ajv');
  report.versions = { '@modelcontextprotocol/client': version('@modelcontextprotocol/client') };
  const options = {
    'v2-auto': { versionNegotiation: { mode: 'auto' } },
    'v2-pinned': { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  }[variant];
  client = new Client({ name: `toolbelt-sdk-${variant}`, version: '1.0.0' }, options);
  transport = new StreamableHTTPClientTransport(new URL(mcpURL), { requestInit: { headers } });
  validator = new AjvJsonSchemaValidator();
  callTool = (params, options) => client.callTool(params, options);
}

// call is a tools/call as the host hands it to its model: the first text.
async function call(name, args, options) {
  const res = await callTool({ name, arguments: args }, options);
  const t = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  return { text: t, isError: Boolean(res.isError), meta: res._meta ?? null, resultType: res.resultType };
}

let tools = [];
await step(report, 'load', async () => {
  await client.connect(transport);
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return {
    protocol: client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? '',
    era: client.getProtocolEra?.() ?? 'legacy',
    server: client.getServerVersion?.() ?? null,
    count: tools.length,
    names: tools.map((t) => t.name),
  };
});

await step(report, 'schemas', async () => {
  const failed = [];
  const roots = [];
  let converted = 0;
  for (const t of tools) {
    try {
      validator.getValidator(t.inputSchema);
      converted++;
      if (rootCombinators(t.inputSchema).some((k) => k !== 'enum')) {
        roots.push(t.name);
      }
    } catch (e) {
      pushLimited(failed, { name: t.name, error: message(e) });
    }
  }
  // An MCP host hands its model the schemas as listed.
  const findRecord = tools.find((t) => t.name === 'find_record')?.inputSchema ?? null;
  return { converted, failed, root_combinators: roots, sent: tools.length, find_record: findRecord };
});

await step(report, 'safe', async (out) => {
  out.model_saw = [];
  out.model_saw.push((await call('search_tools', { query: 'write a file', limit: 5 })).text);
  out.model_saw.push((await call('file_write', { path: files.safe, content: `written by ${clientName}` })).text);
  out.model_saw.push((await call('file_read', { path: files.safe })).text);
  return {};
});

await step(report, 'refusal', async () => ({ model_saw: (await call('file_read', { path: '../../etc/passwd' })).text }));

await step(report, 'dangerous', async (out) => {
  out.results = [];
  const first = await call('overwrite_note', { path: files.approved, content: `approved for ${clientName}` });
  out.first_model_saw = first.text;
  out.first_meta = first.meta;
  out.call_id = callIDIn(first.text);
  const a = out.call_id ? await approvalOfCall(out.call_id) : null;
  out.approval_id = a?.id ?? '';
  out.approve_status = a ? await approve(a.id) : 0;
  // As the answer advises: one call_result that waits for the call to end.
  out.wait_seconds = Number(/"wait_seconds": (\d+)/.exec(first.text)?.[1] ?? 0);
  out.results.push((await call('call_result', { call_id: out.call_id || 'missing', wait_seconds: out.wait_seconds })).text);
  out.final_model_saw = out.results.at(-1) ?? '';
  return {};
});

await step(report, 'cancel', async (out) => {
  const ac = new AbortController();
  const stop = new AbortController();
  out.answered = false;
  out.progress = [];
  const watcher = pendingApproval('overwrite_note', files.cancelled, { signal: stop.signal }).then((a) => {
    out.call_id = a?.call_id ?? '';
    out.approval_id = a?.id ?? '';
    ac.abort(new Error('the user stopped the call'));
  });
  try {
    const r = await call(
      'overwrite_note',
      { path: files.cancelled, content: 'must never be written' },
      { signal: ac.signal, onprogress: (p) => out.progress.push(text(p.message ?? p.progress)) },
    );
    out.answered = true;
    out.model_saw = r.text;
    out.run = 'completed';
  } catch (e) {
    out.run = 'threw';
    out.run_error = message(e);
  }
  stop.abort();
  await watcher;
  out.held = !out.answered;
  // Let a notifications/cancelled the SDK sent reach the server.
  await until(() => wire.filter((w) => (w.messages ?? []).some((m) => m.method === 'notifications/cancelled')).every((w) => w.status || w.fetch_error), 5_000);
  return {};
});

// The host stops a call while the tool runs: callTool's signal, with no
// progress asked for (the default).
await step(report, 'abort', (out) =>
  abortRunning(out, 'the user stopped the call', async (signal) => {
    const r = await call(slowTool, { topic: clientName }, { signal });
    out.answered = true;
    out.model_saw = r.text;
    return r;
  }),
);

try {
  await client.close();
} catch (e) {
  report.close_error = message(e);
}
await finish(report);
