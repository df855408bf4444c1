package server_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/logtest"
	"github.com/switchboardhq/switchboard/registry/registrytest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
	"github.com/switchboardhq/switchboard/tenants"
	"github.com/switchboardhq/switchboard/tracing"
)

// otlpReceiver is an OTLP/HTTP traces receiver on loopback: it decodes
// each protobuf export and keeps its spans.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var export coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &export)
		}
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			t.Errorf("OTLP export %s %s (%s): %v", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range export.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// trace waits for the spans of trace id (hex) until want (span names) are
// all there, and returns them by name.
func (r *otlpReceiver) trace(t *testing.T, id string, want ...string) map[string]*tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := map[string]*tracepb.Span{}
		r.mu.Lock()
		for _, s := range r.spans {
			if hex.EncodeToString(s.TraceId) == id {
				if got[s.Name] != nil {
					t.Errorf("trace %s has two %q spans", id, s.Name)
				}
				got[s.Name] = s
			}
		}
		r.mu.Unlock()
		missing := false
		for _, name := range want {
			missing = missing || got[name] == nil
		}
		if !missing {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s: spans %v, want %v", id, keys(got), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func keys(m map[string]*tracepb.Span) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func attr(s *tracepb.Span, key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			if v := a.Value.GetStringValue(); v != "" {
				return v
			}
			return fmt.Sprint(a.Value.GetIntValue())
		}
	}
	return ""
}

// The catalog of the tracing tests: "traced" lets its upstream get the
// traceparent (propagate_trace), "private" keeps the default (off).
func tracingCatalog() map[string]string {
	files := map[string]string{}
	for _, id := range []string{"traced", "private"} {
		propagate := ""
		if id == "traced" {
			propagate = `"propagate_trace": true,`
		}
		files[id+"/connector.json"] = fmt.Sprintf(`{
  "id": %q, "name": %q, "version": "1.0.0", "type": "openapi", "scope": "global", "requires": ["API_KEY"], %s
  "auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "Authorization",
           "format": "Bearer {SECRET:TOKEN}", "field": "TOKEN"},
  "env": [{"name": "API_URL", "label": "API URL", "required": true}, {"name": "TOKEN", "label": "Token", "required": true, "secret": true}],
  "openapi": "openapi.json", "base_url": "{ENV:API_URL}"
}`, id, id, propagate)
		files[id+"/openapi.json"] = `{"openapi": "3.0.3", "info": {"title": "Items", "version": "1"},
  "paths": {"/items/{id}": {"get": {"operationId": "getItem", "x-entity": "item", "x-action": "get", "summary": "One item",
     "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
     "responses": {"200": {"description": "ok"}}}}}}`
	}
	return files
}

// tracingEnv is a server (tracing on when otlp is set) with tenant acme,
// the two instances, a caller, and an upstream that notes the traceparent
// of each request; item "fail" answers 502.
type tracingEnv struct {
	srv    *servertest.Server
	logs   *logtest.Buffer
	caller string

	mu          sync.Mutex
	traceparent map[string]string // by item id
}

func newTracingEnv(t *testing.T, otlp string, ratio float64) *tracingEnv {
	e := &tracingEnv{logs: &logtest.Buffer{}, traceparent: map[string]string{}}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		item := strings.TrimPrefix(r.URL.Path, "/items/")
		e.mu.Lock()
		e.traceparent[item] = r.Header.Get("Traceparent")
		e.mu.Unlock()
		if item == "fail" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": %q}`, item)
	}))
	t.Cleanup(up.Close)
	ctx := context.Background()
	e.srv = servertest.Start(t, server.Config{DB: dbtest.SQLite(t), DataDir: t.TempDir(), OTLPEndpoint: otlp, TraceSampleRatio: ratio,
		Logger:           slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ConnectorCatalog: registrytest.Load(t, tracingCatalog())})
	if _, err := e.srv.Tenants().CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	_, tok, err := e.srv.Tenants().CreateCaller(ctx, "acme", tenants.CallerRequest{Name: "platform", Kind: "agent-platform", Trusted: true, UserMode: "header", ExternalSubjects: []string{"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	e.caller = tok.Reveal()
	for _, id := range []string{"traced", "private"} {
		url, key := secrets.New(up.URL), secrets.New("upstream-key")
		if _, _, err := e.srv.Tenants().Install(ctx, "acme", id, tenants.InstallRequest{ConnectorID: id, AuthMode: "apiKey",
			Agents: []string{"bot"}, Fields: map[string]*secrets.Secret{"API_URL": &url, "TOKEN": &key}}); err != nil {
			t.Fatalf("install %s: %v", id, err)
		}
	}
	return e
}

// call sends a tools/call for item to instance with the request id and
// the caller's traceparent (none when ""); it returns the answer's
// traceresponse header and body.
func (e *tracingEnv) call(t *testing.T, instance, item, requestID, traceparent string) (string, string) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"item","arguments":{"action":"get","id":%q}}}`, item)
	req, _ := http.NewRequest("POST", e.srv.URL+"/workspaces/acme/webhooks/"+instance+".mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + e.caller, "X-Agent-Id": "bot", "X-User-Id": "alice",
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18",
		"X-Request-Id": requestID} {
		req.Header.Set(k, v)
	}
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("tools/call %s %s = %d %s", instance, item, resp.StatusCode, out)
	}
	return resp.Header.Get(tracing.ResponseHeader), string(out)
}

// logLines returns the log lines (decoded) whose request_id is id.
func (e *tracingEnv) logLines(t *testing.T, id string) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(e.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["request_id"] == id {
			out = append(out, m)
		}
	}
	return out
}

// With tracing on (an OTLP/HTTP receiver on loopback), a tools/call that
// carries a W3C traceparent is exported as a "call" span, the child of the
// caller's span in the caller's trace, with a child span per step
// (authenticate, resolve, credentials, upstream). The upstream of a
// connector with propagate_trace gets a traceparent in the same trace
// whose parent is the upstream span; the upstream of a connector without
// it gets none. Every log line of a call carries its trace id. A call
// without a traceparent starts a trace of its own.
func TestTracesOfACall(t *testing.T) {
	t.Parallel()
	rcv := newOTLPReceiver(t)
	e := newTracingEnv(t, rcv.URL+"/v1/traces", 1)

	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	tr, out := e.call(t, "traced", "a1", "req-traced", "00-"+callerTrace+"-"+callerSpan+"-01")
	if !strings.Contains(out, `\"id\": \"a1\"`) || strings.Contains(out, `"isError":true`) {
		t.Fatalf("tools/call = %s", out)
	}
	if tracing.TraceID(tr) != callerTrace {
		t.Errorf("traceresponse = %q, want the caller's trace %s", tr, callerTrace)
	}
	spans := rcv.trace(t, callerTrace, "call", "authenticate", "resolve", "credentials", "upstream")
	call := spans["call"]
	if got := hex.EncodeToString(call.ParentSpanId); got != callerSpan {
		t.Errorf("the call span's parent = %s, want the caller's span %s", got, callerSpan)
	}
	if call.Kind != tracepb.Span_SPAN_KIND_SERVER || attr(call, "switchboard.outcome") != "ok" || attr(call, "switchboard.connector") != "traced" {
		t.Errorf("call span: kind %v, attributes %v", call.Kind, call.Attributes)
	}
	for _, step := range []string{"authenticate", "resolve", "credentials", "upstream"} {
		s := spans[step]
		if !bytes.Equal(s.ParentSpanId, call.SpanId) {
			t.Errorf("span %s: parent %x, want the call span %x", step, s.ParentSpanId, call.SpanId)
		}
		if s.StartTimeUnixNano < call.StartTimeUnixNano || s.EndTimeUnixNano > call.EndTimeUnixNano || s.EndTimeUnixNano < s.StartTimeUnixNano {
			t.Errorf("span %s [%d, %d] is not inside the call [%d, %d]", step, s.StartTimeUnixNano, s.EndTimeUnixNano, call.StartTimeUnixNano, call.EndTimeUnixNano)
		}
	}
	if attr(spans["upstream"], "http.response.status_code") != "200" {
		t.Errorf("upstream span attributes %v", spans["upstream"].Attributes)
	}
	e.mu.Lock()
	sent := e.traceparent["a1"]
	e.mu.Unlock()
	if want := "00-" + callerTrace + "-" + hex.EncodeToString(spans["upstream"].SpanId) + "-01"; sent != want {
		t.Errorf("the traced connector's upstream got traceparent %q, want %q (the upstream span)", sent, want)
	}

	// The private connector's upstream gets no traceparent, though the
	// call is traced.
	const privateTrace = "0af7651916cd43dd8448eb211c80319c"
	e.call(t, "private", "b1", "req-private", "00-"+privateTrace+"-b7ad6b7169203331-01")
	rcv.trace(t, privateTrace, "call", "upstream")
	e.mu.Lock()
	sent = e.traceparent["b1"]
	e.mu.Unlock()
	if sent != "" {
		t.Errorf("the private connector's upstream got traceparent %q", sent)
	}

	// A failing call without a traceparent: a trace of its own, the
	// upstream span and the call marked failed, and every log line of
	// the request (the request line and the call's failure) carries the
	// trace id.
	tr, out = e.call(t, "traced", "fail", "req-fail", "")
	own := tracing.TraceID(tr)
	if own == "" || own == callerTrace || !strings.Contains(out, `"isError":true`) {
		t.Fatalf("failing call: traceresponse %q, answer %s", tr, out)
	}
	spans = rcv.trace(t, own, "call", "upstream")
	if len(spans["call"].ParentSpanId) != 0 {
		t.Errorf("a call without traceparent has parent %x", spans["call"].ParentSpanId)
	}
	if spans["upstream"].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || spans["call"].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR ||
		attr(spans["upstream"], "http.response.status_code") != "502" {
		t.Errorf("failed call: upstream span %v %v, call span %v", spans["upstream"].Status, spans["upstream"].Attributes, spans["call"].Status)
	}
	for id, trace := range map[string]string{"req-traced": callerTrace, "req-fail": own} {
		lines := e.logLines(t, id)
		if id == "req-fail" && len(lines) < 2 {
			t.Errorf("request %s: %d log lines, want the request line and the failure's", id, len(lines))
		}
		for _, l := range lines {
			if l["trace_id"] != trace {
				t.Errorf("log line of %s without its trace id %s: %v", id, trace, l)
			}
		}
	}
}

// With tracing off (the default) nothing of the caller's traceparent goes
// on: no traceresponse, no traceparent upstream even for a connector that
// allows it, no trace_id in the logs.
func TestTracingOffByDefault(t *testing.T) {
	t.Parallel()
	e := newTracingEnv(t, "", 1)
	tr, out := e.call(t, "traced", "c1", "req-off", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if strings.Contains(out, `"isError":true`) {
		t.Fatalf("tools/call = %s", out)
	}
	e.mu.Lock()
	sent := e.traceparent["c1"]
	e.mu.Unlock()
	if tr != "" || sent != "" {
		t.Errorf("tracing off: traceresponse %q, upstream traceparent %q; want neither", tr, sent)
	}
	if strings.Contains(e.logs.String(), "trace_id") {
		t.Errorf("tracing off, yet a log line has a trace_id:\n%s", e.logs.String())
	}
}

// With a sample ratio, calls without a caller's traceparent are traced at
// that ratio (the traceresponse's flags say which; only those are
// exported), and a call with one follows its sampled flag whatever the
// ratio: at 0, a caller's sampled trace is still exported in full and an
// unsampled one is not.
func TestTraceSampleRatio(t *testing.T) {
	t.Parallel()
	rcv := newOTLPReceiver(t)
	half := newTracingEnv(t, rcv.URL+"/v1/traces", 0.5)
	sampled := map[bool]int{}
	var lastSampled, lastNot string
	const calls = 200
	for i := range calls {
		tr, _ := half.call(t, "private", fmt.Sprintf("r%d", i), fmt.Sprintf("req-r%d", i), "")
		on := strings.HasSuffix(tr, "-01")
		if !on && !strings.HasSuffix(tr, "-00") {
			t.Fatalf("traceresponse %q", tr)
		}
		sampled[on]++
		if on {
			lastSampled = tracing.TraceID(tr)
		} else {
			lastNot = tracing.TraceID(tr)
		}
	}
	// Binomial(200, 0.5): outside 60..140 has a probability under 1e-8.
	if sampled[true] < 60 || sampled[true] > 140 {
		t.Errorf("ratio 0.5: %d of %d root calls sampled", sampled[true], calls)
	}
	rcv.trace(t, lastSampled, "call", "upstream")

	none := newTracingEnv(t, rcv.URL+"/v1/traces", 0)
	const callerTrace, unsampledTrace = "5bf92f3577b34da6a3ce929d0e0e4736", "6bf92f3577b34da6a3ce929d0e0e4736"
	none.call(t, "private", "s1", "req-s1", "00-"+callerTrace+"-00f067aa0ba902b7-01")
	none.call(t, "private", "s2", "req-s2", "00-"+unsampledTrace+"-00f067aa0ba902b7-00")
	if tr, _ := none.call(t, "private", "s3", "req-s3", ""); !strings.HasSuffix(tr, "-00") {
		t.Errorf("ratio 0: a call without traceparent was sampled (%s)", tr)
	}
	rcv.trace(t, callerTrace, "call", "authenticate", "resolve", "credentials", "upstream")
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, s := range rcv.spans {
		if id := hex.EncodeToString(s.TraceId); id == unsampledTrace || id == lastNot {
			t.Errorf("span %s of unsampled trace %s exported", s.Name, id)
		}
	}
}
