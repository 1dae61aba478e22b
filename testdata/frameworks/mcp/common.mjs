// common.mjs is what the framework scripts in this folder share: the
// environment the Go test (web/frameworks_test.go) passes, a record of
// every MCP request the framework sends and what it gets back (so the
// report carries raw evidence, whatever the framework shows), the human
// reviewer (REST calls with the reviewer key), and the report itself.
//
// Environment: TOOLBELT_MCP_URL (the /mcp endpoint), TOOLBELT_API_URL (the
// API's root), TOOLBELT_AGENT_KEY (the key the framework connects with),
// TOOLBELT_REVIEWER_KEY (the key that approves dangerous calls), and
// TOOLBELT_CLIENT (a name for the files this run writes), TOOLBELT_SLOW_TOOL
// (a safe tool whose upstream answers only when its request ends) and
// TOOLBELT_SLOW_STATE (that upstream's GET /state: how many requests
// started, how many were cancelled).

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set`);
  }
  return v;
};

export const mcpURL = env('TOOLBELT_MCP_URL');
export const apiURL = env('TOOLBELT_API_URL');
export const agentKey = env('TOOLBELT_AGENT_KEY');
export const reviewerKey = env('TOOLBELT_REVIEWER_KEY');
export const clientName = process.env.TOOLBELT_CLIENT || 'client';
export const slowTool = env('TOOLBELT_SLOW_TOOL');
const slowStateURL = env('TOOLBELT_SLOW_STATE');

// wire records each JSON-RPC message sent to /mcp: its method, whether it
// carried a progress token, its protocol version header, and the HTTP
// status and (first bytes of the) body it got back.
export const wire = [];

const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  if (!url.startsWith(mcpURL)) {
    return realFetch(input, init);
  }
  const method = init?.method ?? (typeof input === 'object' && input.method) ?? 'GET';
  const headers = new Headers(init?.headers ?? (typeof input === 'object' && !(input instanceof URL) ? input.headers : undefined));
  const entry = { http: method, version: headers.get('mcp-protocol-version') ?? '' };
  if (typeof init?.body === 'string') {
    try {
      const msgs = [].concat(JSON.parse(init.body));
      entry.messages = msgs.map((m) => ({
        id: m.id,
        method: m.method ?? (m.result !== undefined ? 'result' : 'error'),
        ...(m.params?.name ? { name: m.params.name } : {}),
        ...(m.params?._meta?.progressToken !== undefined ? { progress_token: true } : {}),
        ...(m.method === 'notifications/cancelled' ? { params: m.params } : {}),
      }));
    } catch {
      entry.messages = [{ method: 'unparsed' }];
    }
  }
  wire.push(entry);
  try {
    const res = await realFetch(input, init);
    entry.status = res.status;
    entry.content_type = res.headers.get('content-type') ?? '';
    if (method === 'POST' && res.body) {
      // Read a copy in the background: the framework reads the original.
      res
        .clone()
        .text()
        .then(
          (t) => (entry.body = t.length > 700 ? t.slice(0, 700) + '…' : t),
          (e) => (entry.body_error = String(e?.message ?? e)),
        );
    }
    return res;
  } catch (e) {
    entry.fetch_error = String(e?.name ?? '') + ': ' + String(e?.message ?? e);
    throw e;
  }
};

// progressTokenSent reports whether any tools/call carried a progress token.
export const progressTokenSent = () => wire.some((w) => (w.messages ?? []).some((m) => m.method === 'tools/call' && m.progress_token));

// cancelSent reports whether the framework sent notifications/cancelled.
export const cancelSent = () => wire.some((w) => (w.messages ?? []).some((m) => m.method === 'notifications/cancelled'));

async function rest(method, path, body) {
  const r = await realFetch(`${apiURL}${path}`, {
    method,
    headers: { Authorization: `Bearer ${reviewerKey}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: r.status, json, text };
}

// approve approves an approval as the reviewer, returning the HTTP status.
export async function approve(approvalID) {
  return (await rest('POST', `/api/v1/approvals/${approvalID}/approve`, { reason: `checked by the ${clientName} framework test` })).status;
}

// pendingApproval waits (up to a deadline) for the pending approval of a
// call of tool whose arguments mention needle, as a reviewer sees it.
export async function pendingApproval(tool, needle, { signal, deadlineMs = 30_000 } = {}) {
  const end = Date.now() + deadlineMs;
  while (Date.now() < end && !signal?.aborted) {
    const r = await rest('GET', '/api/v1/approvals');
    const found = (r.json?.approvals ?? []).find((a) => a.tool === tool && String(a.arguments).includes(needle));
    if (found) {
      return found;
    }
    await new Promise((ok) => setTimeout(ok, 20));
  }
  return null;
}

// approvalOfCall is the approval of a call, as a reviewer sees it.
export async function approvalOfCall(callID) {
  const r = await rest('GET', '/api/v1/approvals');
  return (r.json?.approvals ?? []).find((a) => a.call_id === callID) ?? null;
}

// slowState is what the slow tool's upstream saw: {started, cancelled}.
export async function slowState() {
  const r = await realFetch(slowStateURL);
  return r.json();
}

// slowStarted waits (up to a deadline, or until signal aborts) for the slow
// tool's upstream to get a request: the tool runs. A synchronous call
// appears in the REST API only once it ends, so the upstream says it.
export async function slowStarted({ signal, deadlineMs = 30_000 } = {}) {
  const end = Date.now() + deadlineMs;
  while (Date.now() < end && !signal?.aborted) {
    if ((await slowState()).started > 0) {
      return true;
    }
    await new Promise((ok) => setTimeout(ok, 20));
  }
  return false;
}

// abortRunning runs fn(signal), which makes the framework call the slow
// tool, and aborts signal, as a user stopping the agent, once the tool
// runs. It reports how the framework surfaced the abort, whether the
// upstream saw its request end (waiting a while for it, so the script's
// exit is never what ends it), and the wire record of the call.
export async function abortRunning(out, reason, fn) {
  const ac = new AbortController();
  const stop = new AbortController();
  out.answered = false;
  const watcher = slowStarted({ signal: stop.signal }).then((started) => {
    out.started = started;
    ac.abort(new Error(reason));
  });
  try {
    const r = await fn(ac.signal);
    out.run = 'completed';
    out.run_result = r;
  } catch (e) {
    out.run = 'threw';
    out.run_error = message(e);
  }
  stop.abort();
  await watcher;
  out.upstream_cancelled = Boolean(await until(async () => (await slowState()).cancelled > 0, 10_000));
  // The slow tool's tools/call and the cancellations of it, once what
  // was sent got its answer (finish waits for the bodies).
  const ids = new Set(wire.flatMap((w) => (w.messages ?? []).filter((m) => m.method === 'tools/call' && m.name === slowTool).map((m) => m.id)));
  out.wire = wire.filter((w) => (w.messages ?? []).some((m) => (m.method === 'tools/call' && m.name === slowTool) ||
    (m.method === 'notifications/cancelled' && ids.has(m.params?.requestId))));
  await until(() => out.wire.every((w) => w.status || w.fetch_error), 5_000);
  return {};
}

// callIDIn is the call id in a call_result instruction of a text the
// model read, as a model would copy it.
export function callIDIn(text) {
  const m = /call_result \{\\?"call_id\\?": ?\\?"([^"\\]+)\\?"\}/.exec(text ?? '');
  return m ? m[1] : '';
}

// rootCombinators are the keywords at the root of a JSON schema that
// OpenAI's function calling refuses (and several providers drop).
export function rootCombinators(schema) {
  if (!schema || typeof schema !== 'object') {
    return [];
  }
  return ['oneOf', 'anyOf', 'allOf', 'not', 'enum'].filter((k) => k in schema);
}

// message is an error's text, with its cause.
export function message(e) {
  if (e == null) {
    return '';
  }
  let s = `${e.name ?? 'Error'}: ${e.message ?? String(e)}`;
  if (e.cause) {
    s += ` (cause: ${message(e.cause)})`;
  }
  return s;
}

// text is what a value the model read says, as one string.
export function text(v) {
  if (v == null) {
    return '';
  }
  return typeof v === 'string' ? v : JSON.stringify(v);
}

// step runs fn, recording its result or the error it threw in report[name].
export async function step(report, name, fn) {
  const out = { ok: false };
  report[name] = out;
  try {
    Object.assign(out, await fn(out));
    out.ok = out.ok || !out.error;
  } catch (e) {
    out.error = message(e);
    out.stack = String(e?.stack ?? '').split('\n').slice(0, 6).join('\n');
  }
  return out;
}

// until polls fn until it returns a truthy value or the deadline passes.
export async function until(fn, deadlineMs = 30_000) {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const v = await fn();
    if (v || Date.now() > end) {
      return v;
    }
    await new Promise((ok) => setTimeout(ok, 25));
  }
}

// finish prints the report (with the wire record) and exits, whatever
// connections the framework left open.
export async function finish(report) {
  // Let the background copies of the last bodies finish.
  await new Promise((ok) => setTimeout(ok, 100));
  report.progress_token_sent = progressTokenSent();
  report.cancel_sent = cancelSent();
  report.wire = wire;
  process.stdout.write(JSON.stringify(report) + '\n', () => process.exit(0));
}

// Files this run writes, named after the client.
export const files = {
  safe: `${clientName}-safe.txt`,
  approved: `${clientName}-approved.txt`,
  cancelled: `${clientName}-cancelled.txt`,
};

// limitedErrors keeps the first few schema conversion failures.
export function pushLimited(list, item, max = 20) {
  if (list.length < max) {
    list.push(item);
  }
}

// agentSteps are the steps every agent framework takes alike, its scripted
// model playing each through play(turns, signal): play runs the
// framework's agent once and returns what the model read at each turn
// (texts) and what the framework itself answered, if it says (sdk). The
// steps: a refusal; a call that waits for a reviewer, approved, then read
// with call_result; a call abandoned while it waits; and the user stopping
// the agent while a tool runs.
export async function agentSteps(report, play) {
  await step(report, 'refusal', async () => {
    const r = await play([() => ({ tool: 'file_read', input: { path: '../../etc/passwd' } }), () => ({ text: 'refused' })]);
    return { model_saw: r.texts[1]?.[0] ?? '', sdk: r.sdk };
  });

  // The model follows the answer's advice and waits for the decision with
  // call_result's wait_seconds; the reviewer approves meanwhile.
  await step(report, 'dangerous', async (out) => {
    out.results = [];
    let approving = Promise.resolve(0);
    const r = await play([
      () => ({ tool: 'overwrite_note', input: { path: files.approved, content: `approved for ${clientName}` } }),
      async ([seen]) => {
        out.first_model_saw = seen;
        out.call_id = callIDIn(seen);
        // What the model read may be the content blocks as JSON text.
        const wait = Number(/wait_seconds[\\"]*: (\d+)/.exec(seen)?.[1] ?? 0);
        out.wait_seconds = wait;
        const a = out.call_id ? await approvalOfCall(out.call_id) : null;
        out.approval_id = a?.id ?? '';
        if (a) {
          // The reviewer decides once the model's call_result is on its
          // way and unanswered, so the answer must come from the wait.
          const before = wire.length;
          approving = until(() => wire.slice(before).some((w) => w.body === undefined && !w.fetch_error &&
            (w.messages ?? []).some((m) => m.name === 'call_result'))).then((inFlight) => (inFlight ? approve(a.id) : 0));
        }
        return { tool: 'call_result', input: { call_id: out.call_id || 'missing', wait_seconds: wait } };
      },
      async ([seen]) => {
        out.results.push(seen);
        if (/(CONFIRMATION_REQUIRED|QUEUED|RUNNING):/.test(seen) && out.results.length < 30) {
          await new Promise((ok) => setTimeout(ok, 50));
          return { tool: 'call_result', input: { call_id: out.call_id } };
        }
        return { text: 'done' };
      },
    ]);
    out.final_model_saw = out.results.at(-1) ?? '';
    out.approve_status = await approving;
    out.sdk = r.sdk?.slice(0, 1);
    return {};
  });

  await step(report, 'cancel', async (out) => {
    const ac = new AbortController();
    const stop = new AbortController();
    out.answered = false;
    const watcher = pendingApproval('overwrite_note', files.cancelled, { signal: stop.signal }).then((a) => {
      out.call_id = a?.call_id ?? '';
      out.approval_id = a?.id ?? '';
      out.aborted_after_answer = out.answered;
      ac.abort(new Error('the user stopped the agent'));
    });
    try {
      const r = await play(
        [
          () => ({ tool: 'overwrite_note', input: { path: files.cancelled, content: 'must never be written' } }),
          async ([seen]) => {
            out.answered = true;
            out.model_saw = seen;
            await watcher; // the user stops the agent anyway
            return { text: 'stopped' };
          },
        ],
        ac.signal,
      );
      out.run = 'completed';
      out.sdk = r.sdk;
    } catch (e) {
      out.run = 'threw';
      out.run_error = message(e);
    }
    stop.abort();
    await watcher;
    out.held = !out.answered;
    return {};
  });

  // The user stops the agent (the framework's abort signal) while a tool
  // runs.
  await step(report, 'abort', (out) =>
    abortRunning(out, 'the user stopped the agent', async (signal) => {
      const r = await play(
        [
          () => ({ tool: slowTool, input: { topic: clientName } }),
          ([seen]) => {
            out.answered = true;
            out.model_saw = seen;
            return { text: 'done' };
          },
        ],
        signal,
      );
      return r.sdk;
    }),
  );
}
