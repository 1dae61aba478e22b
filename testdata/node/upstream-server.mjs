// upstream-server.mjs runs a real MCP server from npm over HTTP, for the
// tests of Toolbelt's upstream servers: @modelcontextprotocol/server-everything
// with its own Streamable HTTP ("streamableHttp", at /mcp) or legacy SSE
// ("sse", at /sse) transport, on a free port. It prints one JSON line,
// {"url": ...}, once the server accepts connections, and exits when its
// stdin closes (so it never outlives the test that started it).
import net from "node:net";

const transport = process.argv[2] ?? "streamableHttp";
const paths = { streamableHttp: "/mcp", sse: "/sse" };
if (!paths[transport]) {
  console.error(`usage: node upstream-server.mjs streamableHttp|sse`);
  process.exit(2);
}

const port = await new Promise((resolve, reject) => {
  const probe = net.createServer();
  probe.once("error", reject);
  probe.listen(0, "127.0.0.1", () => {
    const { port } = probe.address();
    probe.close(() => resolve(port));
  });
});
process.env.PORT = String(port);
// The server logs to stdout; this script's stdout is the one JSON line.
console.log = (...args) => console.error(...args);
await import(`@modelcontextprotocol/server-everything/dist/transports/${transport}.js`);

const deadline = Date.now() + 20000;
for (;;) {
  const ok = await new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => { s.end(); resolve(true); });
    s.once("error", () => resolve(false));
  });
  if (ok) break;
  if (Date.now() > deadline) {
    console.error("the server did not listen within 20 s");
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 50));
}
process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${port}${paths[transport]}` }) + "\n");
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
