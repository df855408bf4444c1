// A minimal MCP server over stdio (newline-delimited JSON-RPC), without
// dependencies, for the mcp_local tests: it reports a digest of its TOKEN
// (never the value), its environment's names, its pid and working
// directory; it can start a child, hang, flood its output or crash, and
// wait until the request is cancelled (notifications/cancelled): it writes
// the file its arguments name with ".started" when the call arrives, and
// the file itself when the call is cancelled.
const readline = require("readline");
const crypto = require("crypto");
const { spawn } = require("child_process");
const fs = require("fs");

function sha(v) { return crypto.createHash("sha256").update(v).digest("hex"); }

function send(m) { process.stdout.write(JSON.stringify(m) + "\n"); }
function text(id, t) { send({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: t }] } }); }
const tools = ["whoami", "spawn", "hang", "flood", "crash", "wait"].map((name) => ({ name, inputSchema: { type: "object" } }));

const waiting = new Map(); // request id (JSON) -> the file to report its cancellation in

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.method === "notifications/cancelled" && m.params) {
    const key = JSON.stringify(m.params.requestId);
    const report = waiting.get(key);
    if (report) {
      waiting.delete(key);
      fs.writeFileSync(report, JSON.stringify({ cancelled: true, reason: m.params.reason || "" }));
    }
    return;
  }
  if (m.id === undefined) return;
  switch (m.method) {
    case "initialize":
      return send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params.protocolVersion,
        capabilities: { tools: {} }, serverInfo: { name: "local-test", version: "1.0.0" } } });
    case "tools/list":
      return send({ jsonrpc: "2.0", id: m.id, result: { tools } });
    case "tools/call":
      break;
    default:
      return send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "method not found" } });
  }
  switch (m.params.name) {
    case "whoami":
      return text(m.id, JSON.stringify({
        token_sha256: sha(process.env.TOKEN || ""),
        access_sha256: sha(process.env.ACCESS_TOKEN || ""),
        file_sha256: fs.existsSync("token") ? sha(fs.readFileSync("token")) : "",
        env: Object.keys(process.env).sort(), pid: process.pid, cwd: process.cwd(),
      }));
    case "spawn": {
      const child = spawn("sleep", ["1000"], { stdio: "ignore" });
      return text(m.id, JSON.stringify({ pid: child.pid }));
    }
    case "hang":
      return; // never answers
    case "wait":
      waiting.set(JSON.stringify(m.id), m.params.arguments.report);
      fs.writeFileSync(m.params.arguments.report + ".started", "");
      return; // answers nothing; reports its cancellation
    case "flood": {
      const chunk = "x".repeat(1 << 20);
      for (let i = 0; i < 100; i++) process.stdout.write(chunk);
      return;
    }
    case "crash":
      process.exit(3);
  }
  send({ jsonrpc: "2.0", id: m.id, error: { code: -32602, message: "unknown tool" } });
});
