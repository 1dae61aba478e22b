// oauth-upstream.mjs is a real OAuth-protected MCP server for the tests of
// Toolbelt as an OAuth client of upstream servers (services/connect): the
// TypeScript SDK's authorization server router (mcpAuthRouter: authorize,
// token, register, revoke, RFC 8414 metadata), its bearer middleware
// (requireBearerAuth, bound to this server's resource), protected resource
// metadata (RFC 9728) and a Streamable HTTP MCP endpoint at /mcp. State is
// in memory; it exits when its stdin closes.
//
// Usage: node oauth-upstream.mjs [OPTIONS_JSON]
//
// Options (all optional):
//   accessTTL      access-token lifetime in seconds (default 3600)
//   dcr            false: no dynamic client registration
//   clientId, clientSecret, redirectUris   a pre-registered client
//   cimd           true: advertise client_id_metadata_document_supported and
//                  accept an https client id by fetching its document
//   noS256         true: the metadata names PKCE "plain" only, not S256
//   prmResource    the resource the protected resource metadata claims
//                  (default: this server's /mcp URL)
//   resourceMetadata  the resource_metadata URL the 401 names
//   metadataRedirect  the AS metadata answers 302 to this URL
//   tokenRedirect     the metadata's token endpoint answers 307 to this URL
//
// The person signs in at /authorize: a form with a username field
// (id "username") and an "Allow" button; the redirect back carries code,
// state and iss (RFC 9207). PKCE is S256 only; a code works once; a token
// is bound to the resource indicator it was asked for and refused at /mcp
// when that is not this server; a refresh token works once (rotation).
//
// Standard output: first {"url": MCP_URL, "issuer": ISSUER}, then one JSON
// line per event: {"user", "tool"} for each tools/call, {"event":
// "token"|"refresh"|"refresh_refused"|"revoke"|"register", ...}, and
// {"event": "mark", "id"} for each GET /_mark?id= (a reader knows it has
// every line written before). No token is ever printed.
import http from 'node:http';
import crypto from 'node:crypto';
import express from 'express';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { mcpAuthRouter, createOAuthMetadata } from '@modelcontextprotocol/sdk/server/auth/router.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidGrantError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';

const options = JSON.parse(process.argv[2] ?? '{}');
const accessTTL = Number(options.accessTTL ?? 3600);

// Dependencies may log; this script's stdout is its protocol.
console.log = (...args) => console.error(...args);
const say = obj => process.stdout.write(JSON.stringify(obj) + '\n');
const random = () => crypto.randomBytes(24).toString('base64url');

const app = express();
const server = http.createServer(app);
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(0, '127.0.0.1', resolve);
});
const origin = `http://127.0.0.1:${server.address().port}`;
const issuer = new URL(origin + '/');
const mcpURL = new URL(origin + '/mcp');

const clients = new Map();
if (options.clientId) {
  clients.set(options.clientId, {
    client_id: options.clientId,
    client_secret: options.clientSecret,
    redirect_uris: options.redirectUris ?? [],
    token_endpoint_auth_method: options.clientSecret ? 'client_secret_post' : 'none',
  });
}

const pending = new Map(); // consent request id → {client, params}
const codes = new Map(); // code → {clientId, user, params}
const accessTokens = new Map(); // token → {clientId, user, scopes, resource, expiresAt}
const refreshTokens = new Map(); // token → {clientId, user, scopes, resource}

// jwt makes an access token a person's client can read (sub is the user),
// signed with a key only this process knows; validity is still the map.
const signingKey = crypto.randomBytes(32);
function jwt(claims) {
  const enc = o => Buffer.from(JSON.stringify(o)).toString('base64url');
  const body = `${enc({ alg: 'HS256', typ: 'at+jwt' })}.${enc(claims)}`;
  return `${body}.${crypto.createHmac('sha256', signingKey).update(body).digest('base64url')}`;
}

function issue(clientId, user, scopes, resource) {
  const now = Math.floor(Date.now() / 1000);
  const access = jwt({ iss: issuer.href, sub: user, aud: resource, client_id: clientId, iat: now, exp: now + accessTTL, jti: random() });
  const refresh = random();
  accessTokens.set(access, { clientId, user, scopes, resource, expiresAt: now + accessTTL });
  refreshTokens.set(refresh, { clientId, user, scopes, resource });
  return { access_token: access, token_type: 'Bearer', expires_in: accessTTL, refresh_token: refresh, scope: scopes.join(' ') };
}

const clientsStore = {
  async getClient(id) {
    if (clients.has(id)) return clients.get(id);
    if (options.cimd && id.startsWith('https://')) {
      const res = await fetch(id);
      if (!res.ok) return undefined;
      const doc = await res.json();
      if (doc.client_id !== id) return undefined;
      return { ...doc, token_endpoint_auth_method: 'none' };
    }
    return undefined;
  },
};
if (options.dcr !== false) {
  clientsStore.registerClient = async client => {
    clients.set(client.client_id, client);
    say({ event: 'register', client_id: client.client_id, confidential: Boolean(client.client_secret) });
    return client;
  };
}

const provider = {
  clientsStore,
  async authorize(client, params, res) {
    const id = random();
    pending.set(id, { clientId: client.client_id, params });
    res.type('html').send(`<!doctype html><html lang="en"><head><title>Sign in to the upstream</title></head>
<body><main><h1>Sign in</h1><form method="post" action="/consent">
<input type="hidden" name="request" value="${id}">
<label for="username">Username</label> <input id="username" name="username" autocomplete="username">
<button type="submit">Allow</button></form></main></body></html>`);
  },
  async challengeForAuthorizationCode(client, code) {
    const c = codes.get(code);
    if (!c || c.clientId !== client.client_id) throw new InvalidGrantError('unknown authorization code');
    return c.params.codeChallenge;
  },
  async exchangeAuthorizationCode(client, code, _verifier, redirectUri, resource) {
    const c = codes.get(code);
    codes.delete(code); // single use: a replay finds nothing
    if (!c || c.clientId !== client.client_id) throw new InvalidGrantError('unknown or used authorization code');
    if (redirectUri !== undefined && redirectUri !== c.params.redirectUri) throw new InvalidGrantError('redirect_uri differs');
    const bound = c.params.resource?.href;
    if (resource && bound && resource.href !== bound) throw new InvalidGrantError('resource differs from the authorization request');
    const tokens = issue(client.client_id, c.user, c.params.scopes ?? [], bound ?? resource?.href);
    say({ event: 'token', user: c.user, resource: bound ?? resource?.href ?? null });
    return tokens;
  },
  async exchangeRefreshToken(client, refreshToken, scopes, resource) {
    const r = refreshTokens.get(refreshToken);
    if (!r || r.clientId !== client.client_id) {
      say({ event: 'refresh_refused' });
      throw new InvalidGrantError('unknown, used or revoked refresh token');
    }
    if (resource && r.resource && resource.href !== r.resource) throw new InvalidGrantError('resource differs from the grant');
    refreshTokens.delete(refreshToken); // rotation: the old one is spent
    say({ event: 'refresh', user: r.user });
    return issue(client.client_id, r.user, scopes ?? r.scopes, r.resource);
  },
  async verifyAccessToken(token) {
    const t = accessTokens.get(token);
    if (!t) throw new InvalidTokenError('unknown or revoked access token');
    return {
      token, clientId: t.clientId, scopes: t.scopes, expiresAt: t.expiresAt,
      resource: t.resource ? new URL(t.resource) : undefined, extra: { user: t.user },
    };
  },
  async revokeToken(client, { token }) {
    const kind = accessTokens.delete(token) ? 'access' : refreshTokens.delete(token) ? 'refresh' : 'unknown';
    say({ event: 'revoke', kind });
  },
};

// A test reads the log up to here: every line before this mark is out.
app.get('/_mark', (req, res) => {
  say({ event: 'mark', id: String(req.query.id ?? '') });
  res.status(204).end();
});

// The consent form posts here: the person's name becomes the grant.
app.post('/consent', express.urlencoded({ extended: false }), (req, res) => {
  const p = pending.get(req.body.request);
  pending.delete(req.body.request);
  const user = String(req.body.username ?? '').trim();
  if (!p || !user) {
    res.status(400).type('text').send('unknown request or empty username');
    return;
  }
  const code = random();
  codes.set(code, { clientId: p.clientId, user, params: p.params });
  const back = new URL(p.params.redirectUri);
  back.searchParams.set('code', code);
  if (p.params.state !== undefined) back.searchParams.set('state', p.params.state);
  back.searchParams.set('iss', issuer.href);
  res.redirect(302, back.href);
});

const metadata = createOAuthMetadata({ provider, issuerUrl: issuer });
metadata.authorization_response_iss_parameter_supported = true;
if (options.cimd) metadata.client_id_metadata_document_supported = true;
if (options.noS256) metadata.code_challenge_methods_supported = ['plain'];
if (options.tokenRedirect) {
  metadata.token_endpoint = origin + '/token-moved';
  app.post('/token-moved', (req, res) => res.redirect(307, options.tokenRedirect));
}
app.get('/.well-known/oauth-authorization-server', (req, res) => {
  if (options.metadataRedirect) res.redirect(302, options.metadataRedirect);
  else res.json(metadata);
});
const prmPath = '/.well-known/oauth-protected-resource/mcp';
app.get(prmPath, (req, res) => res.json({
  resource: options.prmResource ?? mcpURL.href,
  authorization_servers: [issuer.href],
  scopes_supported: ['mcp'],
  resource_name: 'oauth-upstream',
}));
const noLimit = { rateLimit: false };
app.use(mcpAuthRouter({
  provider, issuerUrl: issuer, resourceServerUrl: mcpURL, scopesSupported: ['mcp'],
  authorizationOptions: noLimit, tokenOptions: noLimit, clientRegistrationOptions: noLimit, revocationOptions: noLimit,
}));

const bearer = requireBearerAuth({
  verifier: provider,
  expectedResource: mcpURL,
  resourceMetadataUrl: options.resourceMetadata ?? origin + prmPath,
});
app.all('/mcp', bearer, express.json(), async (req, res) => {
  const mcp = new McpServer({ name: 'oauth-upstream', version: '1.0.0' });
  const user = req.auth.extra.user;
  const log = tool => say({ user, tool });
  mcp.registerTool('whoami', { description: 'The username the access token was issued to.', inputSchema: {} }, async () => {
    log('whoami');
    return { content: [{ type: 'text', text: user }] };
  });
  mcp.registerTool('echo', { description: 'Echoes the message.', inputSchema: { message: z.string() } }, async ({ message }) => {
    log('echo');
    return { content: [{ type: 'text', text: message }] };
  });
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => { transport.close(); mcp.close(); });
  await mcp.connect(transport);
  await transport.handleRequest(req, res, req.body);
});

app.use((err, req, res, _next) => {
  console.error(err);
  res.status(500).json({ error: 'server_error' });
});

say({ url: mcpURL.href, issuer: issuer.href });
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
