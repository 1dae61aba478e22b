// flow.ts is what an agent and its reviewer do over Toolbelt's REST API with
// a client typed by openapi-typescript from docs/openapi3.json ("paths",
// imported as toolbelt-api) and plain fetch: select tools for a task, write
// and read a file, meet a validation error, ask for a dangerous call, approve
// it as the reviewer and wait for it to succeed. It prints one JSON report,
// which web/openapi_ts_test.go checks. It is type-checked with strict tsc and
// has no casts: a request that does not fit the document does not compile.
//
// Environment: TOOLBELT_API_URL, TOOLBELT_AGENT_KEY, TOOLBELT_REVIEWER_KEY.
import type { paths } from "toolbelt-api";

type Method = "get" | "post" | "put" | "delete";

// Operation is the operation the document gives path and method.
type Operation<P extends keyof paths, M extends Method> = Extract<paths[P][M], { responses: object }>;

// JSONOf is the JSON a request body or a response carries.
type JSONOf<T> = T extends { content: { "application/json": infer B } } ? B : never;

// Request is what an operation takes: its parameters, and its body when
// it has one (required or not, as the document says).
type Request<O> = (O extends { parameters: infer P } ? { params: P } : never) &
  (O extends { requestBody: infer B }
    ? { body: JSONOf<B> }
    : O extends { requestBody?: infer B }
      ? { body?: JSONOf<NonNullable<B>> }
      : object);

// Status is a status code the operation documents.
type Status<O> = O extends { responses: infer R } ? keyof R & number : never;

// Answer is the JSON the operation answers with status S.
type Answer<O, S> = O extends { responses: infer R } ? (S extends keyof R ? JSONOf<R[S]> : never) : never;

// documented is where the wire meets the types: the server is trusted to
// answer, for the status it was asked for and sent, the JSON the document
// gives that status; only that it is a JSON object is checked here.
function documented<T>(body: unknown): body is T {
  return typeof body === "object" && body !== null;
}

// Unexpected is an answer with another status than the one asked for.
class Unexpected extends Error {}

// api sends one request as the holder of key and returns its answer, which
// must have status want.
async function api<P extends keyof paths, M extends Method, S extends Status<Operation<P, M>>>(
  key: string,
  method: M,
  path: P,
  req: Request<Operation<P, M>>,
  want: S,
): Promise<Answer<Operation<P, M>, S>> {
  const values: unknown = req.params;
  const url = path.replace(/\{(\w+)\}/g, (_: string, name: string) => encodeURIComponent(pathValue(values, name)));
  const body: unknown = "body" in req ? req.body : undefined;
  const res = await fetch(base + url, {
    method: method.toUpperCase(),
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== want) {
    throw new Unexpected(`${method.toUpperCase()} ${url}: ${res.status}, want ${want}: ${text}`);
  }
  const answer: unknown = JSON.parse(text);
  if (!documented<Answer<Operation<P, M>, S>>(answer)) {
    throw new Unexpected(`${method.toUpperCase()} ${url}: ${res.status} is not a JSON object: ${text}`);
  }
  return answer;
}

// pathValue is the path parameter name of params ({path: {name: …}}).
function pathValue(params: unknown, name: string): string {
  if (typeof params === "object" && params !== null && "path" in params) {
    const path: unknown = params.path;
    if (typeof path === "object" && path !== null && name in path) {
      const entries: [string, unknown][] = Object.entries(path);
      for (const [k, v] of entries) {
        if (k === name && (typeof v === "string" || typeof v === "number")) {
          return String(v);
        }
      }
    }
  }
  throw new Unexpected(`no path parameter ${name}`);
}

// field is data's property name when data is an object (a tool's data is
// any JSON value).
function field(data: unknown, name: string): unknown {
  if (typeof data === "object" && data !== null && !Array.isArray(data)) {
    const entries: [string, unknown][] = Object.entries(data);
    return entries.find(([k]) => k === name)?.[1];
  }
  return undefined;
}

function env(name: string): string {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set`);
  }
  return v;
}

const base = env("TOOLBELT_API_URL");
const agent = env("TOOLBELT_AGENT_KEY");
const reviewer = env("TOOLBELT_REVIEWER_KEY");
const session = "ts-flow";

// 1. Select the tools for a task given as a conversation, whose last
// message is a list of parts; each tool comes rendered for OpenAI.
const selected = await api(agent, "post", "/api/v1/tools/select", {
  params: {},
  body: {
    messages: [
      { role: "system", content: "You keep the team's notes in files." },
      { role: "user", content: [{ type: "text", text: "write a note into a file, then read the file back" }] },
    ],
    limit: 10,
    format: "openai",
    session_id: session,
  },
}, 200);
const rendered = (selected.tools ?? []).map((t) => field(field(t.tool, "function"), "name"));

// 2. A safe tool with arguments, then another in the same session.
const wrote = await api(agent, "post", "/api/v1/calls", {
  params: {},
  body: { tool: "file_write", session_id: session, arguments: { path: "a.txt", content: "hello from TypeScript\n" } },
}, 200);
const read = await api(agent, "post", "/api/v1/calls", {
  params: {},
  body: { tool: "file_read", session_id: session, arguments: { path: "a.txt" } },
}, 200);

// 3. A refusal: arguments the tool's parameters do not allow, answered 422
// with the error in the ToolResult; and a selection with no task, 422 with
// the API's error body.
const refused = await api(agent, "post", "/api/v1/calls", {
  params: {},
  body: { tool: "file_read", session_id: session, arguments: { path: 42 } },
}, 422);
const noTask = await api(agent, "post", "/api/v1/tools/select", { params: {}, body: { limit: 3 } }, 422);

// 4. A dangerous tool waits for a reviewer.
const asked = await api(agent, "post", "/api/v1/calls", {
  params: {},
  body: { tool: "overwrite_note", session_id: session, arguments: { path: "b.txt", content: "approved by a reviewer" } },
}, 202);
const callID = asked.call_id ?? "";
const approvalID = field(asked.data, "approval_id");
if (typeof approvalID !== "string") {
  throw new Unexpected(`no approval_id in ${JSON.stringify(asked)}`);
}

// 5. The reviewer approves it; the agent polls the call until it ends.
const approval = await api(reviewer, "post", "/api/v1/approvals/{id}/approve", {
  params: { path: { id: approvalID } },
  body: { reason: "a note is fine" },
}, 200);
const deadline = Date.now() + 60_000;
let record = await api(agent, "get", "/api/v1/calls/{id}", { params: { path: { id: callID } } }, 200);
let polls = 1;
while (record.status !== "succeeded" && record.status !== "failed" && Date.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, 50));
  record = await api(agent, "get", "/api/v1/calls/{id}", { params: { path: { id: callID } } }, 200);
  polls++;
}
const after = await api(agent, "post", "/api/v1/calls", {
  params: {},
  body: { tool: "file_read", session_id: session, arguments: { path: "b.txt" } },
}, 200);

console.log(JSON.stringify({
  selected: (selected.tools ?? []).map((t) => t.name ?? ""),
  rendered,
  selection_id: selected.selection_id ?? "",
  wrote: { status: wrote.status, data: wrote.data },
  read: { status: read.status, content: field(read.data, "content") },
  refused: { status: refused.status, code: refused.error?.code, problems: (refused.error?.problems ?? []).length },
  no_task: { code: noTask.error?.code, message: noTask.error?.message },
  asked: { status: asked.status, code: asked.error?.code, approval_id: approvalID },
  approval: { status: approval.status, decided_by: approval.decided_by },
  record: { status: record.status, polls, result_status: record.result?.status },
  after: { content: field(after.data, "content") },
}));
