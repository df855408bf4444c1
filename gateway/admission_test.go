package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/admission"
	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/database/dbtest"
	"github.com/switchboardhq/switchboard/logtest"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
	"github.com/switchboardhq/switchboard/server/servertest"
)

// admissionOperator is the operator token of the admission tests.
const admissionOperator = "sbo_admission-tests-operator-token-0123456789"

// newAdmissionStack is newStack with call admission configured.
func newAdmissionStack(t testing.TB, db *database.DB, opts admission.Options) (*stack, *servertest.Server) {
	t.Helper()
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := servertest.Start(t, server.Config{DB: db, ConnectorCatalog: loadCRM(t), Logger: logger,
		Audit: audit.WriterOptions{Interval: 20 * time.Millisecond}, Admission: opts, AdminToken: secrets.New(admissionOperator)})
	return &stack{db: db, svc: srv.Tenants(), gw: srv.Gateway(), oauth: srv.OAuth(), prov: srv.Providers(),
		audit: srv.Audit(), astore: srv.AuditStore(), srv: srv.HTTP, logs: logs, bodies: &logtest.Buffer{},
		members: srv.Members()}, srv
}

// appResult is an App-mode answer: its status, Retry-After and error.
type appResult struct {
	status       int
	retryAfter   string
	code         string
	retryAfterMs int64
}

func appCall(t *testing.T, base, tenant, instance, token, user string) appResult {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/workspaces/"+tenant+"/apps/"+instance+"/ops/getMe", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Agent-Id", agent)
	if user != "" {
		req.Header.Set("X-User-Id", user)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var body struct {
		Error struct {
			Code         string `json:"code"`
			RetryAfterMs int64  `json:"retryAfterMs"`
		} `json:"error"`
	}
	json.Unmarshal(b, &body)
	return appResult{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After"), code: body.Error.Code, retryAfterMs: body.Error.RetryAfterMs}
}

// TestAdmissionInTheCallPath builds the server with operator limits (an
// instance may have one call in flight; a user 2 calls, then one a
// minute) and calls through App mode and MCP against a loopback vendor:
// the call over a limit never reaches the vendor, answers 429 with
// rate_limited or concurrency_limited and a retry delay (retryAfterMs and
// Retry-After), is audited with that outcome and counted in
// admission_refusals_total; a tenant admin's lower limit (PUT
// /v1/tenants/{t}/limits) applies to the next call.
func TestAdmissionInTheCallPath(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *database.DB) {
		ctx := context.Background()
		var hits atomic.Int64
		release := make(chan struct{})
		var hold atomic.Bool
		entered := make(chan struct{}, 1)
		vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			if hold.Load() {
				entered <- struct{}{}
				<-release
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"user":"api-key"}`)
		}))
		defer vendor.Close()
		s, srv := newAdmissionStack(t, db, admission.Options{Defaults: admission.Limits{
			Instance: admission.Limit{Concurrency: 1},
			User:     admission.Limit{Rate: 1.0 / 60, Burst: 2},
		}})
		s.tenant(t, "acme")
		s.svc.SetVerifier(nil)
		s.install(t, "acme", "key", "apiKey", map[string]string{"API_URL": vendor.URL, "API_KEY": "good-key"}, agent)
		token := s.caller(t, "acme", headerPlatform("alice", "bob", "carol"))

		// One call in flight (held by the vendor): the next is refused.
		hold.Store(true)
		var wg sync.WaitGroup
		wg.Add(1)
		var first appResult
		go func() { defer wg.Done(); first = appCall(t, s.srv.URL, "acme", "key", token, "alice") }()
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			close(release)
			wg.Wait()
			t.Fatalf("the first call never reached the vendor: %+v", first)
		}
		r := appCall(t, s.srv.URL, "acme", "key", token, "bob")
		if r.status != 429 || r.code != "concurrency_limited" || r.retryAfterMs <= 0 || r.retryAfter == "" {
			t.Errorf("a second call in flight: %+v, want 429 concurrency_limited with a delay", r)
		}
		close(release)
		wg.Wait()
		hold.Store(false)
		if first.status != 200 {
			t.Fatalf("the held call: %+v", first)
		}
		// alice: one more call in her burst of 2, then rate_limited for a
		// minute, through both surfaces; bob is not affected.
		if r := appCall(t, s.srv.URL, "acme", "key", token, "alice"); r.status != 200 {
			t.Fatalf("alice's second call: %+v", r)
		}
		before := hits.Load()
		r = appCall(t, s.srv.URL, "acme", "key", token, "alice")
		if r.status != 429 || r.code != "rate_limited" || r.retryAfterMs < 55_000 || r.retryAfterMs > 60_000 || r.retryAfter != "60" {
			t.Errorf("alice's third call: %+v, want 429 rate_limited retrying in ~60 s", r)
		}
		tr := s.callTool(t, "acme", "key", token, agent, "alice", nil, nil)
		if !tr.isError || tr.code != "rate_limited" || !strings.Contains(tr.raw, "retryAfterMs") {
			t.Errorf("alice over MCP: %+v", tr)
		}
		if hits.Load() != before {
			t.Errorf("refused calls reached the vendor (%d hits)", hits.Load()-before)
		}
		if r := appCall(t, s.srv.URL, "acme", "key", token, "bob"); r.status != 200 {
			t.Errorf("bob: %+v", r)
		}

		// The tenant's admin lowers the user's burst to 1: carol, new,
		// gets 1 call.
		opToken := admissionOperator
		req, _ := http.NewRequest(http.MethodPut, s.srv.URL+"/v1/tenants/acme/limits", strings.NewReader(`{"user":{"rate":0.01,"burst":1}}`))
		req.Header.Set("Authorization", "Bearer "+opToken)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(b), `"effective"`) {
			t.Fatalf("PUT limits: %d %s", res.StatusCode, b)
		}
		req, _ = http.NewRequest(http.MethodPut, s.srv.URL+"/v1/tenants/acme/limits", strings.NewReader(`{"user":{"rate":1}}`))
		req.Header.Set("Authorization", "Bearer "+opToken)
		req.Header.Set("Content-Type", "application/json")
		res, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 400 || !strings.Contains(string(b), "invalid_limits") {
			t.Errorf("PUT limits above the operator's: %d %s", res.StatusCode, b)
		}
		if r := appCall(t, s.srv.URL, "acme", "key", token, "carol"); r.status != 200 {
			t.Fatalf("carol's first call: %+v", r)
		}
		if r := appCall(t, s.srv.URL, "acme", "key", token, "carol"); r.code != "rate_limited" {
			t.Errorf("carol's second call under the tenant's burst of 1: %+v", r)
		}

		s.audit.Flush(ctx)
		ten, _ := s.svc.Tenant(ctx, "acme")
		rows, err := s.astore.List(ctx, ten.ID, audit.Query{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		outcomes := map[string]int{}
		for _, row := range rows {
			outcomes[row.Outcome]++
		}
		if outcomes["rate_limited"] < 3 || outcomes["concurrency_limited"] != 1 {
			t.Errorf("audited outcomes %v, want the refusals among them", outcomes)
		}
		text := scrapeMetrics(t, srv)
		for _, want := range []string{`switchboard_admission_refusals_total{reason="rate",scope="user"} 3`,
			`switchboard_admission_refusals_total{reason="concurrency",scope="instance"} 1`} {
			if !strings.Contains(text, want) {
				t.Errorf("metrics lack %s:\n%s", want, grepLines(text, "switchboard_admission"))
			}
		}
	})
}

// scrapeMetrics reads the server's metrics.
func scrapeMetrics(t *testing.T, srv *servertest.Server) string {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

func grepLines(text, prefix string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
