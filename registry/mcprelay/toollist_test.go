package mcprelay

import (
	"encoding/json"
	"fmt"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// listFixture is a list of n tools like a proxied server's, the last one
// with x-mcp-header annotations at two depths.
func listFixture(n int) []*sdk.Tool {
	var tools []*sdk.Tool
	for i := range n - 1 {
		tools = append(tools, &sdk.Tool{Name: fmt.Sprintf("tool_%d", i), InputSchema: json.RawMessage(
			`{"type":"object","properties":{"query":{"type":"string","description":"what to look for"},"limit":{"type":"integer"}}}`)})
	}
	return append(tools, &sdk.Tool{Name: "region", InputSchema: json.RawMessage(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},"note":{"type":"string"},
		"nested":{"type":"object","properties":{"level":{"type":"integer","x-mcp-header":"Level"}}}}}`)})
}

// TestToolListBindings: the bindings are read once per list, at any
// depth, for the first tool of a name; a tool without annotations, or
// not in the list, has none.
func TestToolListBindings(t *testing.T) {
	tools := listFixture(5)
	tools = append(tools, &sdk.Tool{Name: "region", InputSchema: json.RawMessage(`{"type":"object"}`)})
	l := NewToolList(tools)
	got := map[string]string{}
	for _, b := range l.Bindings("region") {
		got[b.Header] = fmt.Sprint(b.Path)
	}
	if len(got) != 2 || got["Region"] != "[region]" || got["Level"] != "[nested level]" {
		t.Errorf("region's bindings = %v", got)
	}
	if b := l.Bindings("tool_1"); b != nil {
		t.Errorf("tool_1's bindings = %v", b)
	}
	if b := l.Bindings("absent"); b != nil {
		t.Errorf("an absent tool's bindings = %v", b)
	}
	if NewToolList(nil).Tools == nil {
		t.Error("a nil list is not empty")
	}
}

// BenchmarkForwardedBindings: the x-mcp-header bindings a 2026-07-28
// forwarded tools/call is checked against, in a list of 50 tools:
// per-call is what each call did before (scan the list, marshal the
// tool's input schema, read it), cached what it does now (a lookup in
// the list built once per listing). Compare the two in the same run.
func BenchmarkForwardedBindings(b *testing.B) {
	tools := listFixture(50)
	b.Run("per-call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, tool := range tools {
				if tool.Name == "region" {
					if len(paramBindings(tool)) != 2 {
						b.Fatal("bindings")
					}
				}
			}
		}
	})
	l := NewToolList(tools)
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if len(l.Bindings("region")) != 2 {
				b.Fatal("bindings")
			}
		}
	})
}
