// mcp-client.mjs drives Toolbelt's /mcp with the official TypeScript SDK
// client, as an MCP host would, and prints a JSON report of what it found
// for the Go test (web/mcp_clients_test.go) to check.
//
// Every message the server sends is parsed with the SDK's own zod schemas
// (the JSON-RPC envelope, then the result schema of the request it answers,
// or the server notification schema), on top of the parsing the client does
// itself, so a message the SDK would refuse is reported, not hidden.
//
// Environment: TOOLBELT_MCP_URL (the /mcp endpoint), TOOLBELT_AGENT_KEY (the
// key the client connects with), TOOLBELT_REVIEWER_KEY (the key that
// approves the dangerous calls, through the REST API), TOOLBELT_API_URL (the
// API's root).
//
// Steps: initialize; tools/list page by page; search_tools; a dangerous call
// answered at once as waiting, approved, then read with call_result; the same
// call with a progress token, held open while a reviewer approves it, its
// progress notifications recorded; a safe call reading what the approved
// calls wrote; two refused calls.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  InitializeResultSchema,
  JSONRPCMessageSchema,
  JSONRPCResultResponseSchema,
  LATEST_PROTOCOL_VERSION,
  ListToolsResultSchema,
  ProgressNotificationSchema,
  ServerNotificationSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
  ToolSchema,
} from '@modelcontextprotocol/sdk/types.js';

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set`);
  }
  return v;
};
const mcpURL = env('TOOLBELT_MCP_URL');
const apiURL = env('TOOLBELT_API_URL');
const agentKey = env('TOOLBELT_AGENT_KEY');
const reviewerKey = env('TOOLBELT_REVIEWER_KEY');
const sdkVersion = JSON.parse(
  readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url)),
).version;

// Each schema failure, with where it happened; the Go test wants none.
const schemaErrors = [];
const counts = { messages: 0, results: {}, notifications: {} };

function check(schema, value, where) {
  const r = schema.safeParse(value);
  if (!r.success) {
    schemaErrors.push({ where, issues: r.error.issues.slice(0, 5) });
  }
  return r.success ? r.data : value;
}

// The method of each request sent, by id, to pick the schema of its answer.
const sent = new Map();
const resultSchemas = {
  initialize: InitializeResultSchema,
  'tools/list': ListToolsResultSchema,
  'tools/call': CallToolResultSchema,
};

const transport = new StreamableHTTPClientTransport(new URL(mcpURL), {
  requestInit: { headers: { Authorization: `Bearer ${agentKey}` } },
});
const send = transport.send.bind(transport);
transport.send = (message, options) => {
  if (message.id !== undefined && message.method) {
    sent.set(message.id, message.method);
  }
  return send(message, options);
};
// Set before connect: the client calls it first for every message received.
transport.onmessage = (message) => {
  counts.messages++;
  check(JSONRPCMessageSchema, message, 'envelope');
  if (message.method && message.id === undefined) {
    counts.notifications[message.method] = (counts.notifications[message.method] ?? 0) + 1;
    check(ServerNotificationSchema, message, `notification ${message.method}`);
    if (message.method === 'notifications/progress') {
      check(ProgressNotificationSchema, message, 'progress notification');
    }
    return;
  }
  if (message.result !== undefined) {
    const method = sent.get(message.id) ?? 'unknown';
    counts.results[method] = (counts.results[method] ?? 0) + 1;
    check(JSONRPCResultResponseSchema, message, `response to ${method}`);
    if (resultSchemas[method]) {
      check(resultSchemas[method], message.result, `${method} result`);
    }
  }
};

const client = new Client({ name: 'toolbelt-ts-conformance', version: '1.0.0' });
await client.connect(transport);

const report = {
  sdk: sdkVersion,
  client_latest: LATEST_PROTOCOL_VERSION,
  client_supported: SUPPORTED_PROTOCOL_VERSIONS,
  negotiated: transport.protocolVersion,
  session: Boolean(transport.sessionId),
  server: client.getServerVersion(),
  tools_capability: Boolean(client.getServerCapabilities()?.tools),
};

// tools/list, page by page.
const names = [];
const pageSizes = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  check(ListToolsResultSchema, page, 'tools/list page');
  for (const tool of page.tools) {
    check(ToolSchema, tool, `tool ${tool.name}`);
    names.push(tool.name);
  }
  pageSizes.push(page.tools.length);
  cursor = page.nextCursor;
} while (cursor);
report.list = {
  pages: pageSizes.length,
  page_sizes: pageSizes,
  tools: names.length,
  distinct: new Set(names).size,
  first: names.slice(0, 2),
  names,
};

// A tools/call, its result parsed by the client and again here.
async function call(name, args, options) {
  const res = await client.callTool({ name, arguments: args }, CallToolResultSchema, options);
  check(CallToolResultSchema, res, `tools/call ${name}`);
  const text = res.content?.[0]?.type === 'text' ? res.content[0].text : '';
  return {
    isError: Boolean(res.isError),
    code: res.isError ? text.split(':')[0] : '',
    text,
    structured: res.structuredContent ?? null,
    call_id: res._meta?.['toolbelt/call_id'] ?? '',
    status: res._meta?.['toolbelt/status'] ?? '',
    approval_id: res._meta?.['toolbelt/approval_id'] ?? '',
  };
}

async function approve(approvalID) {
  const r = await fetch(`${apiURL}/api/v1/approvals/${approvalID}/approve`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${reviewerKey}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ reason: 'checked by the TypeScript client test' }),
  });
  return r.status;
}

const search = await call('search_tools', { query: 'read a file', limit: 5 });
report.search = { isError: search.isError, tools: (search.structured?.tools ?? []).map((t) => t.name), first: search.structured?.tools?.[0] ?? null };

// A dangerous call without a progress token: answered at once, waiting;
// call_result reads the outcome once a reviewer approved it.
const parked = await call('overwrite_note', { path: 'parked.txt', content: 'approved while parked' });
report.parked = { ...parked, approve_status: parked.approval_id ? await approve(parked.approval_id) : 0 };
for (let i = 0; i < 400; i++) {
  const r = await call('call_result', { call_id: parked.call_id });
  report.parked.after = r;
  if (!r.isError) {
    break;
  }
  await new Promise((ok) => setTimeout(ok, 25));
}

// The same call with a progress token: the request stays open while the
// reviewer decides, and every change is a progress notification.
const progress = [];
let approving = Promise.resolve(0);
const followed = await call(
  'overwrite_note',
  { path: 'followed.txt', content: 'approved while waiting' },
  {
    resetTimeoutOnProgress: true,
    timeout: 60_000,
    onprogress: (p) => {
      progress.push({ progress: p.progress, total: p.total ?? null, message: p.message ?? '', status: p._meta?.['toolbelt/status'] ?? '' });
      const id = p._meta?.['toolbelt/approval_id'];
      if (progress.length === 1 && id) {
        approving = approve(id);
      }
    },
  },
);
report.followed = {
  ...followed,
  approve_status: await approving,
  progress,
  increasing: progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress),
};

// A safe call: read back what the approved calls wrote.
report.safe = await call('file_read', { path: 'followed.txt' });
report.safe_parked = await call('file_read', { path: 'parked.txt' });

// Refusals: a path outside the work directory, a tool outside the grants.
report.refused = await call('file_read', { path: '../../etc/passwd' });
report.denied = await call('shell_exec', { command: 'id' });

await client.close();
report.messages = counts;
report.schema_errors = schemaErrors;
process.stdout.write(JSON.stringify(report) + '\n');
