// The official TypeScript SDK client against one Switchboard instance:
// tools/list, then a tools/call that reaches the upstream. The SDK
// validates the result's structuredContent against the tool's
// outputSchema. Configuration comes from the environment (MCP_URL,
// MCP_TOKEN, MCP_AGENT_ID, MCP_TOOL, MCP_ARGS); the answer is one JSON
// line on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.env.MCP_URL);
const transport = new StreamableHTTPClientTransport(url, {
  requestInit: {
    headers: {
      Authorization: `Bearer ${process.env.MCP_TOKEN}`,
      "X-Agent-Id": process.env.MCP_AGENT_ID,
    },
  },
});
const client = new Client({ name: "switchboard-ts-sdk-test", version: "1.0.0" });
try {
  await client.connect(transport);
  const list = await client.listTools();
  const result = await client.callTool({
    name: process.env.MCP_TOOL,
    arguments: JSON.parse(process.env.MCP_ARGS),
  });
  process.stdout.write(JSON.stringify({
    protocolVersion: transport.protocolVersion ?? null,
    tools: list.tools.map((t) => ({ name: t.name, hasOutputSchema: t.outputSchema !== undefined })),
    result,
  }) + "\n");
  await client.close();
} catch (err) {
  process.stderr.write(`ts client: ${err?.stack ?? err}\n`);
  process.exit(1);
}
