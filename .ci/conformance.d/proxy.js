// The credential-adding proxy in front of Switchboard (the suite cannot
// send headers of its own): every request gets the caller's credential
// ($CONF_TOKEN) and, when $CONF_AGENT is set, the agent id; Host, Origin,
// the MCP headers and the body pass through unchanged. With $CONF_READER
// set, it is a knowledge-sync service: each resources/* request names the
// member it reads for in params._meta.targetUserId, as the knowledge
// contract has a sync service do.
//
//   node proxy.js <listen port> <switchboard port>
"use strict";
const http = require("http");
const [listen, target] = process.argv.slice(2).map(Number);
const agent = new http.Agent({ keepAlive: true });
const reader = process.env.CONF_READER || "";

function withReader(body) {
  let msg;
  try {
    msg = JSON.parse(body);
  } catch {
    return body;
  }
  const one = (m) => {
    if (m && typeof m.method === "string" && m.method.startsWith("resources/")) {
      m.params = m.params || {};
      m.params._meta = { ...(m.params._meta || {}), targetUserId: reader };
    }
  };
  Array.isArray(msg) ? msg.forEach(one) : one(msg);
  return Buffer.from(JSON.stringify(msg));
}

http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: "Bearer " + process.env.CONF_TOKEN };
  if (process.env.CONF_AGENT) headers["x-agent-id"] = process.env.CONF_AGENT;
  const forward = (body) => {
    if (body && headers["content-length"] !== undefined) headers["content-length"] = String(body.length);
    const up = http.request({ host: "127.0.0.1", port: target, method: req.method, path: req.url, headers, agent }, (r) => {
      res.writeHead(r.statusCode, r.rawHeaders);
      r.pipe(res);
    });
    up.on("error", () => { res.writeHead(502); res.end(); });
    body ? up.end(body) : req.pipe(up);
  };
  if (!reader) return forward(null);
  const chunks = [];
  req.on("data", (c) => chunks.push(c)).on("end", () => forward(withReader(Buffer.concat(chunks))));
}).listen(listen, "127.0.0.1");
