// Clock: a dependency-free MCP server over stdio (newline-delimited
// JSON-RPC 2.0) with two tools, now and convert.
"use strict";
const readline = require("readline");

const tools = [
  { name: "now", description: "The current time, in UTC and in a time zone.",
    inputSchema: { type: "object", properties: { timezone: { type: "string", description: "IANA time zone, such as Europe/Paris (default UTC)" } } } },
  { name: "convert", description: "An ISO 8601 time in another time zone.",
    inputSchema: { type: "object", required: ["time", "to_timezone"], properties: {
      time: { type: "string", description: "ISO 8601 time with an offset or Z" },
      to_timezone: { type: "string", description: "IANA time zone" } } } },
];

function send(m) { process.stdout.write(JSON.stringify(m) + "\n"); }

function inZone(date, zone) {
  return new Intl.DateTimeFormat("en-CA", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false, timeZoneName: "short" }).format(date);
}

function call(name, args) {
  const zone = (name === "now" ? args.timezone : args.to_timezone) || "UTC";
  try { new Intl.DateTimeFormat("en", { timeZone: zone }); } catch { throw new Error("unknown time zone " + JSON.stringify(zone)); }
  let date = new Date();
  if (name === "convert") {
    date = new Date(String(args.time || ""));
    if (isNaN(date.getTime())) throw new Error("time is not an ISO 8601 time");
  } else if (name !== "now") {
    throw new Error("unknown tool " + name);
  }
  const out = { utc: date.toISOString(), timezone: zone, local: inZone(date, zone) };
  return { content: [{ type: "text", text: JSON.stringify(out) }], structuredContent: out };
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.id === undefined || m.id === null) return;
  switch (m.method) {
    case "initialize":
      return send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params && m.params.protocolVersion || "2025-06-18",
        capabilities: { tools: {} }, serverInfo: { name: "clock", version: "1.0.0" } } });
    case "ping":
      return send({ jsonrpc: "2.0", id: m.id, result: {} });
    case "tools/list":
      return send({ jsonrpc: "2.0", id: m.id, result: { tools } });
    case "tools/call":
      try {
        return send({ jsonrpc: "2.0", id: m.id, result: call(m.params.name, m.params.arguments || {}) });
      } catch (e) {
        return send({ jsonrpc: "2.0", id: m.id, result: { isError: true, content: [{ type: "text", text: e.message }] } });
      }
    default:
      return send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "method not found" } });
  }
});
