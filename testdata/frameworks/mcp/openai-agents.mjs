// openai-agents.mjs drives Toolbelt's /mcp with the OpenAI Agents SDK
// (@openai/agents, MCPServerStreamableHttp) with its default settings, a
// scripted Model choosing the tool calls (no network), and prints a JSON
// report for web/frameworks_test.go.
import { readFileSync } from 'node:fs';
import { Agent, MCPServerStreamableHttp, Usage, mcpToFunctionTool, run, setTracingDisabled } from '@openai/agents';
import {
  agentKey, agentSteps, clientName, files, finish, mcpURL, message, pushLimited, rootCombinators, step, text,
} from './common.mjs';

setTracingDisabled(true);
const version = (p) => JSON.parse(readFileSync(new URL(`../node_modules/${p}/package.json`, import.meta.url))).version;
const report = {
  client: 'openai-agents',
  versions: { '@openai/agents': version('@openai/agents'), '@modelcontextprotocol/client': version('@modelcontextprotocol/client') },
};

let callSeq = 0;

// outputText is what a function_call_result item hands the model.
function outputText(item) {
  const o = item.output;
  if (typeof o === 'string') {
    return o;
  }
  if (o?.type === 'text') {
    return o.text;
  }
  if (Array.isArray(o)) {
    return o.map((p) => (p.type === 'input_text' || p.type === 'text' ? p.text : JSON.stringify(p))).join('\n');
  }
  return text(o);
}

// ScriptedModel plays turns: each gets the tool results the model reads
// (the function_call_result items after its last function call) and
// returns a tool call {tool, input} or {text}.
class ScriptedModel {
  constructor(turns) {
    this.turns = turns;
    this.i = 0;
    this.seen = [];
    this.sentTools = null;
  }

  async getResponse(request) {
    this.sentTools ??= request.tools ?? [];
    const input = Array.isArray(request.input) ? request.input : [];
    let start = input.length;
    while (start > 0 && input[start - 1].type === 'function_call_result') {
      start--;
    }
    const read = input.slice(start).map(outputText);
    this.seen.push(read);
    const turn = this.turns[Math.min(this.i++, this.turns.length - 1)];
    const act = await turn(read);
    const output = act.tool
      ? [{ type: 'function_call', callId: `call-${++callSeq}`, name: act.tool, arguments: JSON.stringify(act.input), status: 'completed' }]
      : [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: act.text ?? 'done' }] }];
    return { usage: new Usage(), output, responseId: `resp-${callSeq}` };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse() {
    throw new Error('the scripted model does not stream');
  }
}

const server = new MCPServerStreamableHttp({ url: mcpURL, requestInit: { headers: { Authorization: `Bearer ${agentKey}` } } });

// play runs an agent with the MCP server and a scripted model.
async function play(turns, options = {}) {
  const model = new ScriptedModel(turns);
  const agent = new Agent({ name: 'toolbelt-test', instructions: 'Use the tools.', model, mcpServers: [server] });
  const res = await run(agent, 'Use the tools.', { maxTurns: 40, ...options });
  return { seen: model.seen, texts: model.seen, sentTools: model.sentTools, final: res.finalOutput };
}

let mcpTools = [];
await step(report, 'load', async () => {
  await server.connect();
  mcpTools = await server.listTools();
  // The SDK keeps its MCP client on the server it wraps.
  const session = server.underlying?.session ?? server.session;
  return {
    protocol: session?.getNegotiatedProtocolVersion?.() ?? '',
    era: session?.getProtocolEra?.() ?? '',
    server: session?.getServerVersion?.() ?? null,
    count: mcpTools.length,
    names: mcpTools.map((t) => t.name),
  };
});

await step(report, 'schemas', async () => {
  const failed = [];
  const roots = [];
  let converted = 0;
  for (const t of mcpTools) {
    try {
      const ft = mcpToFunctionTool(t, server, false);
      converted++;
      if (rootCombinators(ft.parameters).some((k) => k !== 'enum')) {
        roots.push(t.name);
      }
    } catch (e) {
      pushLimited(failed, { name: t.name, error: message(e) });
    }
  }
  return { converted, failed, root_combinators: roots };
});

await step(report, 'safe', async () => {
  const r = await play([
    () => ({ tool: 'search_tools', input: { query: 'write a file', limit: 5 } }),
    () => ({ tool: 'file_write', input: { path: files.safe, content: `written by ${clientName}` } }),
    () => ({ tool: 'file_read', input: { path: files.safe } }),
    () => ({ text: 'done' }),
  ]);
  const sent = r.sentTools ?? [];
  report.schemas.sent = sent.length;
  report.schemas.sent_root_combinators = sent.filter((t) => rootCombinators(t.parameters).some((k) => k !== 'enum')).map((t) => t.name);
  report.schemas.find_record = sent.find((t) => t.name === 'find_record') ?? null;
  return { model_saw: r.seen.slice(1).flat() };
});

await agentSteps(report, (turns, signal) => play(turns, { signal }));

try {
  await server.close();
} catch (e) {
  report.close_error = message(e);
}
await finish(report);
