package registry

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	switchboard "github.com/switchboardhq/switchboard"
)

func TestDescribeAndTools(t *testing.T) {
	t.Parallel()
	get := testOp("GET", "/w/{id}", []Param{{Name: "id", In: "path", Required: true, Schema: str()}}, nil)
	get.ID, get.Name, get.Summary = "getWidget", "getWidget", "Get a widget"
	del := testOp("DELETE", "/w/{id}", []Param{{Name: "id", In: "path", Required: true, Schema: str()}}, nil)
	del.ID, del.Name = "deleteWidget", "deleteWidget"
	e := &Entity{Name: "widgets", Description: "Widgets.", Actions: []*Action{{Name: "get", Op: get}, {Name: "delete", Op: del}},
		InputSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"action": str()}},
		Annotations: Annotations{Destructive: true, Idempotent: true}}
	api := NewAPI("W", nil, []*Entity{e}, nil)

	doc, err := e.Describe("get")
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	ann, _ := json.Marshal(d["annotations"])
	if d["operation_id"] != "getWidget" || d["method"] != "GET" || string(ann) != `{"idempotentHint":true,"readOnlyHint":true}` ||
		!strings.Contains(string(doc), `"inputSchema":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]`) {
		t.Errorf("Describe(get) = %s", doc)
	}
	if doc, err := e.Describe(""); err != nil || !strings.Contains(string(doc), `"action":"delete"`) || !strings.Contains(string(doc), `"required":["id"]`) {
		t.Errorf("Describe() = %s %v", doc, err)
	}
	if _, err := e.Describe("nope"); switchboard.CodeOf(err) != "invalid_arguments" || !strings.Contains(err.Error(), "actions: delete, get") {
		t.Errorf("Describe(nope) = %v", err)
	}

	want := `{"tools":[{"name":"widgets","description":"Widgets.","inputSchema":{"type":"object","properties":{"action":{"type":"string"}}},"annotations":{"idempotentHint":true}}]}`
	if got := string(api.ToolsJSON()); got != want || api.ToolsListSize() != len(want) {
		t.Errorf("ToolsJSON = %s", got)
	}
	if (Annotations{}).MCP().DestructiveHint == nil || *(Annotations{}).MCP().DestructiveHint {
		t.Error("a non-destructive write tool must say destructiveHint false")
	}
}

func TestBuildRequestArgNamesAndTemplateQuery(t *testing.T) {
	t.Parallel()
	op := testOp("GET", "/r/{id}?beta=true#v2", []Param{
		{Name: "id", In: "path", Required: true, Schema: str()},
		{Name: "id", Arg: "header_id", In: "header", Schema: str()},
		{Name: "action", Arg: "query_action", In: "query", Schema: str()},
	}, nil)
	op.InputSchema.Properties = map[string]*jsonschema.Schema{"id": str(), "header_id": str(), "query_action": str()}
	req, err := BuildRequest(context.Background(), Call{Op: op, BaseURL: "https://api.example.test/v1",
		Args: map[string]any{"id": "p", "header_id": "h", "query_action": "go"}})
	if err != nil {
		t.Fatal(err)
	}
	if req.URL.String() != "https://api.example.test/v1/r/p?beta=true&action=go" || req.Header.Get("id") != "h" {
		t.Errorf("request %s %v", req.URL, req.Header)
	}
}
