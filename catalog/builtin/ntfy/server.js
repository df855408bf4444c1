// ntfy: a dependency-free MCP server over stdio (newline-delimited
// JSON-RPC 2.0) that publishes to the user's own ntfy topic, configured
// in its environment (NTFY_URL, NTFY_TOPIC, NTFY_TOKEN).
"use strict";
const readline = require("readline");

const tools = [{ name: "publish", description: "Send a push notification to your ntfy topic.",
  inputSchema: { type: "object", required: ["message"], properties: {
    message: { type: "string" }, title: { type: "string" },
    priority: { type: "integer", minimum: 1, maximum: 5 }, tags: { type: "array", items: { type: "string" } } } } }];

function send(m) { process.stdout.write(JSON.stringify(m) + "\n"); }
function result(id, text, isError) { send({ jsonrpc: "2.0", id, result: { isError: !!isError, content: [{ type: "text", text }] } }); }

async function publish(id, args) {
  const base = (process.env.NTFY_URL || "https://ntfy.sh").replace(/\/+$/, "");
  const topic = process.env.NTFY_TOPIC || "";
  if (!topic || typeof args.message !== "string" || args.message === "") return result(id, "message and a configured topic are required", true);
  const headers = { "Content-Type": "text/plain" };
  if (process.env.NTFY_TOKEN) headers.Authorization = "Bearer " + process.env.NTFY_TOKEN;
  if (args.title) headers.Title = String(args.title).replace(/[\r\n]/g, " ");
  if (args.priority) headers.Priority = String(Math.min(5, Math.max(1, args.priority | 0)));
  if (Array.isArray(args.tags)) headers.Tags = args.tags.map(String).join(",").replace(/[\r\n]/g, "");
  try {
    const res = await fetch(base + "/" + encodeURIComponent(topic), { method: "POST", headers, body: args.message,
      signal: AbortSignal.timeout(15000), redirect: "error" });
    if (!res.ok) return result(id, "ntfy answered " + res.status, true);
    return result(id, "published to " + topic);
  } catch (e) {
    return result(id, "ntfy could not be reached", true);
  }
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.id === undefined || m.id === null) return;
  switch (m.method) {
    case "initialize":
      return send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params && m.params.protocolVersion || "2025-06-18",
        capabilities: { tools: {} }, serverInfo: { name: "ntfy", version: "1.0.0" } } });
    case "ping":
      return send({ jsonrpc: "2.0", id: m.id, result: {} });
    case "tools/list":
      return send({ jsonrpc: "2.0", id: m.id, result: { tools } });
    case "tools/call":
      if (m.params.name !== "publish") return result(m.id, "unknown tool " + m.params.name, true);
      return publish(m.id, m.params.arguments || {});
    default:
      return send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "method not found" } });
  }
});
