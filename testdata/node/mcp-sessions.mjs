// mcp-sessions.mjs opens MCP sessions on Toolbelt's /mcp with the official
// TypeScript SDK client and leaves them as most hosts do: close() drops the
// connection without ending the session. With --terminate it ends each
// one first (transport.terminateSession(), a DELETE), as docs/mcp.md asks.
// It prints a JSON report for the Go test (web/mcp_sessions_test.go): the
// id of each session opened, in order, and the error of each refused.
//
// Usage: node mcp-sessions.mjs COUNT [--terminate]
// Environment: TOOLBELT_MCP_URL (the /mcp endpoint), TOOLBELT_AGENT_KEY.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = process.env.TOOLBELT_MCP_URL;
const key = process.env.TOOLBELT_AGENT_KEY;
if (!url || !key) {
  throw new Error('TOOLBELT_MCP_URL and TOOLBELT_AGENT_KEY must be set');
}
const count = Number(process.argv[2]);
const terminate = process.argv.includes('--terminate');

const report = { sessions: [], errors: [] };
for (let i = 0; i < count; i++) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  const client = new Client({ name: 'toolbelt-sessions-test', version: '1.0.0' });
  try {
    await client.connect(transport);
    await client.listTools();
    report.sessions.push(transport.sessionId);
    if (terminate) {
      await transport.terminateSession();
    }
  } catch (err) {
    report.errors.push(String(err?.message ?? err));
  }
  await client.close();
}
process.stdout.write(JSON.stringify(report));
