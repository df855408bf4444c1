package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database/dbtest"
)

// TestGoSDKClientEachVersion runs the official Go SDK client, forced to
// each protocol version, against one instance: tools/list, a tools/call
// that reaches the upstream, resources/list, and a missing resource.
func TestGoSDKClientEachVersion(t *testing.T) {
	t.Parallel()
	s := newStack(t, dbtest.SQLite(t))
	tok := s.tenant(t, "acme", canaryA, "agent-1")
	for _, tc := range []struct {
		version     string
		missingCode int64
	}{
		{"2025-03-26", -32002}, // the 2025 revisions: "Resource not found: -32002"
		{"2025-06-18", -32002},
		{"2025-11-25", -32002},
		{"2026-07-28", -32602}, // SEP-2164: Invalid params
	} {
		t.Run(tc.version, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-" + tc.version, Version: "1"}, nil)
			sess, err := c.Connect(ctx, &sdk.StreamableClientTransport{
				Endpoint:             s.mcpURL("acme", "shop"),
				HTTPClient:           &http.Client{Transport: &headers{token: tok, agent: "agent-1", bodies: s.bodies}},
				DisableStandaloneSSE: true,
			}, &sdk.ClientSessionOptions{ProtocolVersion: tc.version})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer sess.Close()
			if init := sess.InitializeResult(); init == nil || init.ProtocolVersion != tc.version {
				t.Fatalf("negotiated %+v, want %s", init, tc.version)
			}
			before := s.up.hits.Load()
			list, err := sess.ListTools(ctx, nil)
			if err != nil || len(list.Tools) != 2 || list.Tools[0].Name != "status" || list.Tools[1].Name != "widgets" {
				t.Fatalf("tools/list: %v %+v", err, list)
			}
			res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "widgets", Arguments: map[string]any{"action": "get", "id": "w1"}})
			if err != nil || res.IsError || !strings.Contains(resultText(t, res), `"owner": "acme"`) {
				t.Fatalf("tools/call: %v %+v", err, res)
			}
			if s.up.hits.Load() == before {
				t.Error("the call did not reach the upstream")
			}
			rl, err := sess.ListResources(ctx, nil)
			if err != nil || len(rl.Resources) != 0 {
				t.Errorf("resources/list: %v %+v", err, rl)
			}
			_, err = sess.ReadResource(ctx, &sdk.ReadResourceParams{URI: "widgets://nope"})
			if err == nil || !strings.Contains(err.Error(), "Resource not found") {
				t.Errorf("resources/read of a missing resource: %v", err)
			}
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != tc.missingCode {
				t.Errorf("missing resource: %v, want code %d", err, tc.missingCode)
			}
		})
	}
}
