// langchain.mjs drives Toolbelt's /mcp with LangChain.js
// (@langchain/mcp-adapters' MultiServerMCPClient, a LangGraph ReAct agent)
// with their default settings, a scripted chat model choosing the tool
// calls (no network), and prints a JSON report for web/frameworks_test.go.
import { readFileSync } from 'node:fs';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { convertToOpenAITool } from '@langchain/core/utils/function_calling';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { MultiServerMCPClient } from '@langchain/mcp-adapters';
import {
  agentKey, agentSteps, clientName, files, finish, mcpURL, message, pushLimited, rootCombinators, step, text,
} from './common.mjs';

const version = (p) => JSON.parse(readFileSync(new URL(`../node_modules/${p}/package.json`, import.meta.url))).version;
const report = {
  client: 'langchain',
  versions: {
    '@langchain/mcp-adapters': version('@langchain/mcp-adapters'),
    '@langchain/langgraph': version('@langchain/langgraph'),
    '@langchain/core': version('@langchain/core'),
  },
};

let callSeq = 0;

// content is what a ToolMessage hands the model, as one string.
function content(m) {
  const c = m.content;
  if (typeof c === 'string') {
    return c;
  }
  if (Array.isArray(c)) {
    return c.map((p) => (typeof p === 'string' ? p : p.type === 'text' ? p.text : JSON.stringify(p))).join('\n');
  }
  return text(c);
}

// ScriptedChatModel plays turns: each gets the tool results the model reads
// (the tool messages after its last message) and returns a tool call
// {tool, input} or {text}. bindTools records the tools as LangChain would
// send them to OpenAI.
class ScriptedChatModel extends BaseChatModel {
  constructor(turns) {
    super({});
    this.turns = turns;
    this.i = 0;
    this.seen = [];
    this.bound = null;
  }

  _llmType() {
    return 'scripted';
  }

  bindTools(tools) {
    this.bound ??= tools.map((t) => {
      try {
        return convertToOpenAITool(t);
      } catch (e) {
        return { failed: t.name, error: message(e) };
      }
    });
    return this;
  }

  async _generate(messages) {
    let start = messages.length;
    while (start > 0 && messages[start - 1]._getType() === 'tool') {
      start--;
    }
    const read = messages.slice(start).map(content);
    this.seen.push(read);
    const turn = this.turns[Math.min(this.i++, this.turns.length - 1)];
    const act = await turn(read);
    const msg = act.tool
      ? new AIMessage({ content: '', tool_calls: [{ name: act.tool, args: act.input, id: `call-${++callSeq}`, type: 'tool_call' }] })
      : new AIMessage({ content: act.text ?? 'done' });
    return { generations: [{ text: typeof msg.content === 'string' ? msg.content : '', message: msg }] };
  }
}

const client = new MultiServerMCPClient({ mcpServers: { toolbelt: { url: mcpURL, headers: { Authorization: `Bearer ${agentKey}` } } } });
let tools = [];

// play runs a LangGraph ReAct agent with the MCP tools and a scripted model.
async function play(turns, options = {}) {
  const model = new ScriptedChatModel(turns);
  const agent = createReactAgent({ llm: model, tools });
  await agent.invoke({ messages: [new HumanMessage('Use the tools.')] }, { recursionLimit: 100, ...options });
  return { seen: model.seen, texts: model.seen, bound: model.bound };
}

await step(report, 'load', async () => {
  tools = await client.getTools();
  const sdk = await client.getClient('toolbelt');
  return {
    protocol: sdk?.transport?.protocolVersion ?? '',
    server: sdk?.getServerVersion?.() ?? null,
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
      const fn = convertToOpenAITool(t).function;
      converted++;
      if (rootCombinators(fn.parameters).some((k) => k !== 'enum')) {
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
  const sent = r.bound ?? [];
  report.schemas.sent = sent.length;
  report.schemas.sent_failed = sent.filter((t) => t.failed);
  report.schemas.sent_root_combinators = sent
    .filter((t) => rootCombinators(t.function?.parameters).some((k) => k !== 'enum'))
    .map((t) => t.function.name);
  report.schemas.find_record = sent.find((t) => t.function?.name === 'find_record') ?? null;
  return { model_saw: r.seen.slice(1).flat() };
});

await agentSteps(report, (turns, signal) => play(turns, { signal }));

try {
  await client.close();
} catch (e) {
  report.close_error = message(e);
}
await finish(report);
