// mcp-oauth.mjs is an MCP client that signs in to Toolbelt with OAuth the
// way a headless host would: the official TypeScript SDK's
// StreamableHTTPClientTransport with an OAuthClientProvider whose client
// is a client ID metadata document (clientMetadataUrl, an https URL the Go
// test serves). The SDK discovers the authorization server from /mcp's
// 401, builds the authorization URL (PKCE S256, resource indicator), and
// this script prints it instead of opening a browser; the Go test plays
// the person (signs in, consents) and the browser lands on this script's
// loopback callback. The script then exchanges the code, reconnects,
// lists the tools and calls one.
//
// Usage: node mcp-oauth.mjs MCP_URL CLIENT_METADATA_URL TOOL [ARGUMENTS_JSON] [--refresh]
//
// It writes one JSON object a line on stdout, in this order:
//   {"callback": "http://127.0.0.1:PORT/callback"}  where it listens (any
//       port: the document registers http://127.0.0.1/callback, and a
//       loopback redirect URI matches on any port, RFC 8252 §7.3)
//   {"authorize": URL}     the authorization URL to open; the script then
//       waits for the callback (TOOLBELT_OAUTH_WAIT_MS, default 60000)
//   {"token": {...}}       what the token response said, without the tokens
//   {"tools": [names]}     tools/list after the reconnect
//   {"call": result}       the tools/call result
//   {"refreshed": {...}, "call": result}  with --refresh: the access token is
//       spoiled, the next call gets a 401, the SDK refreshes and retries
// Tokens stay in memory and are never printed. Any failure exits non-zero
// with the error on stderr. NODE_EXTRA_CA_CERTS makes node trust a test CA
// when Toolbelt is served over https.
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const args = process.argv.slice(2).filter(a => !a.startsWith('--'));
const refresh = process.argv.includes('--refresh');
const [mcpUrl, clientMetadataUrl, toolName, toolArgs = '{}'] = args;
if (!mcpUrl || !clientMetadataUrl || !toolName) {
  throw new Error('usage: node mcp-oauth.mjs MCP_URL CLIENT_METADATA_URL TOOL [ARGUMENTS_JSON] [--refresh]');
}
const waitMs = Number(process.env.TOOLBELT_OAUTH_WAIT_MS ?? 60000);

const say = obj => process.stdout.write(JSON.stringify(obj) + '\n');

// callback is the loopback server the authorization server redirects the
// browser to: it resolves with the code once, checking the state.
function callbackServer(expectedState) {
  let settle;
  const code = new Promise((resolve, reject) => (settle = { resolve, reject }));
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== '/callback') {
      res.writeHead(404).end();
      return;
    }
    const error = url.searchParams.get('error');
    const state = url.searchParams.get('state');
    const got = url.searchParams.get('code');
    if (error) {
      res.writeHead(400, { 'Content-Type': 'text/plain' }).end(`authorization failed: ${error}`);
      settle.reject(new Error(`authorization failed: ${error}: ${url.searchParams.get('error_description') ?? ''}`));
    } else if (state !== expectedState) {
      res.writeHead(400, { 'Content-Type': 'text/plain' }).end('state mismatch');
      settle.reject(new Error(`callback state ${JSON.stringify(state)} is not the one sent`));
    } else if (!got) {
      res.writeHead(400, { 'Content-Type': 'text/plain' }).end('no code');
      settle.reject(new Error('callback without a code'));
    } else {
      res.writeHead(200, { 'Content-Type': 'text/plain' }).end('Signed in; you may close this window.');
      settle.resolve({ code: got, iss: url.searchParams.get('iss') });
    }
  });
  code.catch(() => {}); // awaited later; a refusal before then is not unhandled
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve({ server, code, port: server.address().port }));
  });
}

// provider keeps everything in memory, as the SDK hands it over: the SDK
// stamps client information and tokens with the issuer and expects them
// back unchanged.
class MemoryProvider {
  constructor(redirectUrl, metadataUrl, state, onAuthorize) {
    this._redirectUrl = redirectUrl;
    this.clientMetadataUrl = metadataUrl;
    this._state = state;
    this._onAuthorize = onAuthorize;
  }
  get redirectUrl() { return this._redirectUrl; }
  get clientMetadata() {
    // Used only if the server does not take metadata documents (then it
    // registers dynamically, RFC 7591).
    return {
      client_name: 'mcp-oauth.mjs',
      redirect_uris: [this._redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() { return this._state; }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this._tokens; }
  saveTokens(tokens) { this._tokens = tokens; }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() {
    if (!this._verifier) throw new Error('no code verifier saved');
    return this._verifier;
  }
  redirectToAuthorization(url) { this._onAuthorize(url); }
  saveDiscoveryState(s) { this._discovery = s; }
  discoveryState() { return this._discovery; }
  invalidateCredentials(scope) {
    if (scope === 'all' || scope === 'client') this._client = undefined;
    if (scope === 'all' || scope === 'tokens') this._tokens = undefined;
    if (scope === 'all' || scope === 'verifier') this._verifier = undefined;
    if (scope === 'all' || scope === 'discovery') this._discovery = undefined;
  }
}

// tokenSummary is what a token response said, without the tokens.
function tokenSummary(t) {
  return {
    token_type: t?.token_type, scope: t?.scope, expires_in: t?.expires_in,
    access_token: Boolean(t?.access_token), refresh_token: Boolean(t?.refresh_token),
  };
}

async function connect(provider) {
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  const client = new Client({ name: 'toolbelt-oauth-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

const state = randomBytes(16).toString('base64url');
const { server, code, port } = await callbackServer(state);
try {
  const redirectUrl = `http://127.0.0.1:${port}/callback`;
  say({ callback: redirectUrl });
  let authorizeUrl;
  const provider = new MemoryProvider(redirectUrl, clientMetadataUrl, state, url => {
    authorizeUrl = url.toString();
    say({ authorize: authorizeUrl });
  });

  // The first connect meets /mcp's 401: the SDK discovers, then asks for
  // the redirect and throws UnauthorizedError.
  const first = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  try {
    await new Client({ name: 'toolbelt-oauth-test', version: '1.0.0' }).connect(first);
    throw new Error('connected without authorization: /mcp did not ask for a token');
  } catch (err) {
    if (!(err instanceof UnauthorizedError) || !authorizeUrl) throw err;
  }

  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no callback within ${waitMs} ms`)), waitMs);
  });
  const { code: authCode } = await Promise.race([code, timeout]);
  clearTimeout(timer);
  await first.finishAuth(authCode);
  say({ token: tokenSummary(provider.tokens()) });

  const { client, transport } = await connect(provider);
  const { tools } = await client.listTools();
  say({ tools: tools.map(t => t.name) });
  say({ call: await client.callTool({ name: toolName, arguments: JSON.parse(toolArgs) }) });

  if (refresh) {
    // A spoiled access token is one the server refuses, as an expired one:
    // the transport's 401 handling must refresh and retry on its own.
    const before = provider.tokens();
    provider.saveTokens({ ...before, access_token: 'spoiled' });
    const call = await client.callTool({ name: toolName, arguments: JSON.parse(toolArgs) });
    const after = provider.tokens();
    say({
      refreshed: { ...tokenSummary(after), rotated: after.refresh_token !== before.refresh_token },
      call,
    });
  }
  await transport.close();
} finally {
  server.closeAllConnections();
  server.close();
}
