package mcp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/chromiumtest"
	"github.com/switchboardhq/switchboard/database/dbtest"
)

// TestAppViewInChromium loads the GitHub issues table in headless
// Chromium, in an iframe sandboxed with allow-scripts only, inside a test
// host page on loopback. The host side of the MCP Apps bridge is the
// page's script: it reads the view with resources/read and forwards the
// view's tools/call (marked with _meta["io.modelcontextprotocol/ui"]) to
// the real instance endpoint through the test's /rpc, which holds the
// caller token. A probe the host adds at the end of the view (so under
// the view's own policy) reports the rendered rows, the answers to two
// write calls, and what became of a fetch to a loopback origin the view
// does not declare.
func TestAppViewInChromium(t *testing.T) {
	t.Parallel()
	ctx := chromiumtest.Start(t, 2*time.Minute)
	gh := newGitHubAPI(t)
	s, tok := githubStack(t, dbtest.SQLite(t), gh)

	// An origin the view does not declare; the host page reaches it once
	// (the control), the view must not.
	var undeclared, control atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/control" {
			control.Add(1)
		} else {
			undeclared.Add(1)
		}
		w.Header().Set("Access-Control-Allow-Origin", "*")
		io.WriteString(w, "{}")
	}))
	t.Cleanup(other.Close)

	host := http.NewServeMux()
	host.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		page := strings.NewReplacer("{{URI}}", appURI, "{{OTHER}}", other.URL, "{{PROBE}}", jsString(strings.ReplaceAll(appProbe, "{{OTHER}}", other.URL))).Replace(hostPage)
		io.WriteString(w, page)
	})
	// /rpc: one JSON-RPC request of the page, sent to the instance
	// endpoint as the agent platform's caller.
	host.HandleFunc("POST /rpc", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": in.Method, "params": in.Params})
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, s.mcpURL("acme", "gh"), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Agent-Id", "agent-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(lastMessage(b), &out); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		delete(out, "id")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
	hs := httptest.NewServer(host)
	t.Cleanup(hs.Close)

	var got struct {
		Rows        []string       `json:"rows"`
		Fetch       string         `json:"fetch"`
		Violations  []string       `json:"violations"`
		BridgeWrite map[string]any `json:"bridgeWrite"`
		EntityWrite map[string]any `json:"entityWrite"`
		Control     string         `json:"control"`
		Status      string         `json:"status"`
	}
	done := `(() => { const r = window.results || {};
	  return r.rows && r.fetch && r.bridgeWrite && r.entityWrite && r.control && r.violations ? JSON.stringify(r) : null; })()`
	if _, err := chromedp.Run(ctx, chromedp.Navigate(hs.URL+"/")); err != nil {
		t.Fatal(err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Poll[string](done, chromedp.WithPollingTimeout(45*time.Second)))
	if err != nil {
		partial, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(window.results || {})`))
		t.Fatalf("the view did not report: %v (so far: %s)", err, partial)
	}
	t.Logf("the view reported: %s", raw)
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}

	// The rows, read through the bridge from the loopback GitHub, as
	// text (the title's markup is not markup).
	want := []string{"#1Login page <b>crashes</b>openada", "#2Typo in READMEclosedgrace"}
	if fmt.Sprint(got.Rows) != fmt.Sprint(want) {
		t.Errorf("rows = %q, want %q", got.Rows, want)
	}
	if gh.reads.Load() == 0 {
		t.Error("the view's rows did not come from the upstream")
	}
	// Writes from the view: refused by the server, never sent upstream.
	for name, res := range map[string]map[string]any{"bridge": got.BridgeWrite, "issues": got.EntityWrite} {
		if code := resultCode(res); code != "app_write_refused" {
			t.Errorf("%s write from the view: %v, want app_write_refused", name, res)
		}
	}
	if n := gh.writes.Load(); n != 0 {
		t.Errorf("the upstream was sent %d writes", n)
	}
	// The policy: the undeclared origin is reachable (the host page's
	// control fetch) but not from the view.
	if got.Control != "reached" || control.Load() != 1 {
		t.Errorf("control fetch = %q (%d hits): the test cannot tell the policy from a dead origin", got.Control, control.Load())
	}
	if !strings.HasPrefix(got.Fetch, "blocked") || undeclared.Load() != 0 {
		t.Errorf("the view's fetch to an undeclared origin: %q, %d requests reached it", got.Fetch, undeclared.Load())
	}
	// That fetch is the view's only violation: the view itself needs
	// nothing its policy refuses.
	if fmt.Sprint(got.Violations) != "[connect-src]" {
		t.Errorf("securitypolicyviolation directives = %q, want [connect-src]", got.Violations)
	}
}

// resultCode is the error code of a tool result as the page received it
// ({"result": CallToolResult} or {"error": ...}).
func resultCode(answer map[string]any) string {
	res, _ := answer["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	e, _ := sc["error"].(map[string]any)
	if res["isError"] != true {
		return ""
	}
	code, _ := e["code"].(string)
	return code
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// hostPage is the test host: it renders the view in an allow-scripts
// sandbox and is the host side of its bridge (ui/initialize, tool-input,
// tools/call and resources/read forwarded to /rpc with the app mark).
const hostPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>MCP Apps test host</title></head>
<body>
<iframe id="view" sandbox="allow-scripts" title="view" style="width:100%;height:400px"></iframe>
<script>
"use strict";
window.results = {};
const URI = "{{URI}}";
const iframe = document.getElementById("view");
async function rpc(method, params) {
  const r = await fetch("/rpc", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({method, params})});
  return r.json();
}
function toView(msg) { iframe.contentWindow.postMessage(Object.assign({jsonrpc: "2.0"}, msg), "*"); }
window.addEventListener("message", async (ev) => {
  if (ev.source !== iframe.contentWindow) return;
  const m = ev.data;
  if (!m || m.jsonrpc !== "2.0" || typeof m.method !== "string") return;
  switch (m.method) {
  case "ui/initialize":
    toView({id: m.id, result: {protocolVersion: "2026-01-26", hostInfo: {name: "switchboard-test-host", version: "1"},
      hostCapabilities: {serverTools: {}, serverResources: {}}, hostContext: {displayMode: "inline"}}});
    return;
  case "ui/notifications/initialized":
    toView({method: "ui/notifications/tool-input", params: {arguments: {action: "list", owner: "octo", repo: "hello"}}});
    return;
  case "tools/call":
  case "resources/read": {
    const params = Object.assign({}, m.params);
    params._meta = Object.assign({}, params._meta, {"io.modelcontextprotocol/ui": {resourceUri: URI}});
    const answer = await rpc(m.method, params);
    toView(Object.assign({id: m.id}, answer));
    return;
  }
  case "test/probe":
    window.results[m.params.name] = m.params.value;
    return;
  }
  if (m.id != null) toView({id: m.id, error: {code: -32601, message: "Method not found"}});
});
(async () => {
  try { await fetch("{{OTHER}}/control", {mode: "no-cors"}); window.results.control = "reached"; }
  catch (e) { window.results.control = "failed: " + e; }
  const read = await rpc("resources/read", {uri: URI});
  const html = read.result.contents[0].text;
  iframe.srcdoc = html.replace("</body>", {{PROBE}} + "</body>");
})();
</script>
</body></html>`

// appProbe is what the test adds to the view: it runs under the view's
// policy and origin and reports to the host (test/probe).
const appProbe = `<script>
(function () {
  var id = 1000;
  function report(name, value) { parent.postMessage({jsonrpc: "2.0", method: "test/probe", params: {name: name, value: value}}, "*"); }
  function call(name, args) {
    var my = id++;
    parent.postMessage({jsonrpc: "2.0", id: my, method: "tools/call", params: {name: name, arguments: args}}, "*");
    return new Promise(function (resolve) {
      window.addEventListener("message", function l(ev) {
        if (ev.data && ev.data.id === my) { window.removeEventListener("message", l); resolve(ev.data); }
      });
    });
  }
  var violations = [];
  document.addEventListener("securitypolicyviolation", function (e) { violations.push(e.effectiveDirective); report("violations", violations); });
  fetch("{{OTHER}}/from-view").then(function () { report("fetch", "allowed"); }, function (e) { report("fetch", "blocked: " + e); });
  var w = {action: "create", owner: "octo", repo: "hello", title: "written by a view"};
  call("github_issues_read", w).then(function (r) { report("bridgeWrite", r); });
  call("issues", w).then(function (r) { report("entityWrite", r); });
  var t = setInterval(function () {
    var rows = document.querySelectorAll("#rows tr");
    if (rows.length) { clearInterval(t); report("rows", Array.prototype.map.call(rows, function (r) { return r.textContent; })); }
  }, 50);
})();
</script>`
