package openapi

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/jsonschema-go/jsonschema"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

const longID = "plantAVeryLongTreeOperationNameThatGoesOnAndOnWellPastTheSixtyFourCharacterLimitOfTools1plantAVeryLo"

func compileWidgets(t *testing.T, mapping []byte) *registry.Spec {
	t.Helper()
	spec, err := os.ReadFile("testdata/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	api, err := Compile(spec, mapping)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return api
}

func actionNames(e *registry.Entity) []string {
	var out []string
	for _, a := range e.Actions {
		out = append(out, a.Name)
	}
	return out
}

func TestCompileGrouping(t *testing.T) {
	t.Parallel()
	api := compileWidgets(t, nil)
	checkAPI(t, api)
	if api.Title != "Widgets" || !slices.Equal(api.Servers, []string{"https://api.example.test/v1"}) {
		t.Errorf("title %q servers %v", api.Title, api.Servers)
	}
	if len(api.Problems) != 0 {
		t.Errorf("problems: %v", api.Problems)
	}
	want := map[string][]string{
		"files":   {"post_uploads"},
		"gizmo":   {"browse"},
		"things":  {"fetch_account"},
		"trees":   {actionName(longID, "trees")},
		"widgets": {"create", "delete", "get", "list", "update_v2"},
	}
	var got []string
	for _, e := range api.Entities {
		got = append(got, e.Name)
		if w, ok := want[e.Name]; !ok || !slices.Equal(actionNames(e), w) {
			t.Errorf("entity %s actions %v, want %v", e.Name, actionNames(e), w)
		}
	}
	if !slices.IsSorted(got) || len(got) != len(want) {
		t.Errorf("entities %v", got)
	}
	w, _ := api.Entity("widgets")
	if !strings.HasPrefix(w.Description, "Widgets are the things we make.") || !strings.Contains(w.Description, "- list: List widgets") {
		t.Errorf("description %q", w.Description)
	}
	if w.Annotations != (registry.Annotations{Destructive: true}) {
		t.Errorf("widgets annotations %+v", w.Annotations)
	}
	if g, _ := api.Entity("gizmo"); g.Annotations != (registry.Annotations{ReadOnly: true, Idempotent: true}) {
		t.Errorf("gizmo annotations %+v", g.Annotations)
	}
	act := w.InputSchema.Properties["action"]
	if !slices.Equal(act.Enum, []any{"create", "delete", "get", "list", "update_v2", "describe"}) || !slices.Equal(w.InputSchema.Required, []string{"action"}) {
		t.Errorf("action enum %v required %v", act.Enum, w.InputSchema.Required)
	}
	for _, p := range []string{"widget_id", "limit", "colors", "filter", "X-Trace", "body"} {
		if w.InputSchema.Properties[p] == nil {
			t.Errorf("entity schema lacks %s", p)
		}
	}
	if d := w.InputSchema.Properties["body"].Description; !strings.Contains(d, "taken by: create, update_v2") {
		t.Errorf("conflicting body description %q", d)
	}
}

func TestCompileOperations(t *testing.T) {
	t.Parallel()
	api := compileWidgets(t, nil)
	tests := []struct {
		id, name, method, path, server string
		params                         []string // in:name
		required                       []string
		body                           string
	}{
		{id: "widgets/update#v2", name: "widgets_update_v2", method: "PATCH", path: "/widgets/{widget_id}",
			params: []string{"path:widget_id", "header:X-Trace"}, required: []string{"widget_id"}, body: "application/x-www-form-urlencoded"},
		{id: "getWidget", name: "getWidget", method: "GET", path: "/widgets/{widget_id}",
			params: []string{"path:widget_id", "header:X-Trace"}, required: []string{"widget_id", "X-Trace"}},
		{id: "createWidget", name: "createWidget", method: "POST", path: "/widgets", required: []string{"body"}, body: "application/json"},
		{id: "FetchAccount", name: "FetchAccount", method: "GET", path: "/Accounts/{Sid}.json", params: []string{"path:Sid"}, required: []string{"Sid"}},
		{id: "post_uploads", name: "post_uploads", method: "POST", path: "/uploads", server: "https://upload.example.test/v1", body: "multipart/form-data"},
		{id: longID, name: toolSafe(longID, 64), method: "POST", path: "/trees", body: "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			op, ok := api.Operation(tt.id)
			if !ok {
				t.Fatalf("Operation(%q) not found", tt.id)
			}
			if byName, _ := api.Operation(op.Name); byName != op {
				t.Errorf("Operation(%q) by name differs", op.Name)
			}
			if op.Name != tt.name || !toolName.MatchString(op.Name) || op.Method != tt.method || op.Path != tt.path || op.Server != tt.server {
				t.Errorf("got %s %s %s server %q", op.Name, op.Method, op.Path, op.Server)
			}
			var params []string
			for _, p := range op.Params {
				params = append(params, p.In+":"+p.Name)
			}
			if !slices.Equal(params, tt.params) {
				t.Errorf("params %v, want %v", params, tt.params)
			}
			if !slices.Equal(op.InputSchema.Required, tt.required) {
				t.Errorf("required %v, want %v", op.InputSchema.Required, tt.required)
			}
			if (op.Body == nil) != (tt.body == "") || op.Body != nil && op.Body.ContentType != tt.body {
				t.Errorf("body %+v, want %q", op.Body, tt.body)
			}
			checkSchema(t, op.Name, op.InputSchema)
		})
	}
	if op, _ := api.Operation(longID); len(op.Name) != 64 {
		t.Errorf("long name %q has %d chars", op.Name, len(op.Name))
	}
}

func TestCompileSchemas(t *testing.T) {
	t.Parallel()
	api := compileWidgets(t, nil)
	create, _ := api.Operation("createWidget")
	body := create.Body.Schema
	if len(body.AllOf) != 0 || body.Type != "object" {
		t.Fatalf("allOf not merged: %+v", body)
	}
	for _, p := range []string{"id", "name", "size", "description"} {
		if body.Properties[p] == nil {
			t.Errorf("merged schema lacks %s", p)
		}
	}
	if !slices.Equal(body.Required, []string{"id", "name"}) {
		t.Errorf("required %v", body.Required)
	}
	if got := body.Properties["name"].Types; !slices.Equal(got, []string{"string", "null"}) {
		t.Errorf("nullable types %v", got)
	}
	if e := body.Properties["size"].Enum; !slices.Equal(e, []any{"s", "m", nil}) {
		t.Errorf("nullable enum %v", e)
	}
	if d := body.Properties["description"].Description; len(d) > 1024 || len(d) < 1000 {
		t.Errorf("description of %d chars", len(d))
	}

	tree, _ := api.Operation(longID)
	b, _ := json.Marshal(tree.InputSchema)
	if !strings.Contains(string(b), "recursive reference to Node") || strings.Contains(string(b), "$ref") {
		t.Errorf("cycle not cut: %s", b)
	}
	list, _ := api.Operation("listWidgets")
	if it := list.InputSchema.Properties["loose"].Items; it == nil {
		t.Error("array without items kept")
	}

	// The compiled schemas validate arguments.
	get, _ := api.Operation("getWidget")
	tests := []struct {
		args map[string]any
		ok   bool
		want string
	}{
		{map[string]any{"widget_id": "w1", "X-Trace": "t"}, true, ""},
		{map[string]any{"X-Trace": "t"}, false, "missing required widget_id"},
		{map[string]any{"widget_id": 7, "X-Trace": "t"}, false, `argument "widget_id"`},
		{map[string]any{"widget_id": "w", "X-Trace": "t", "bogus": 1}, false, `unknown "bogus"`},
	}
	for _, tt := range tests {
		err := get.Validate(tt.args)
		if (err == nil) != tt.ok {
			t.Errorf("Validate(%v) = %v", tt.args, err)
			continue
		}
		if err == nil {
			continue
		}
		se, _ := switchboard.AsError(err)
		if !errors.Is(err, switchboard.ErrInvalid) || se.Code != "invalid_arguments" ||
			!strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "widget_id (string, required)") {
			t.Errorf("Validate(%v) = %v", tt.args, err)
		}
	}
}

func TestCompileMapping(t *testing.T) {
	t.Parallel()
	mapping := []byte(`{"entities": {"Stuff Things": {"description": "Mapped.", "actions": {
		"list": "listWidgets", "fetch": "FetchAccount", "edit": "widgets_update_v2", "ghost": "noSuchOp"}}}}`)
	api := compileWidgets(t, mapping)
	checkAPI(t, api)
	if len(api.Entities) != 1 {
		t.Fatalf("entities %d", len(api.Entities))
	}
	e := api.Entities[0]
	if e.Name != "Stuff_Things" || !slices.Equal(actionNames(e), []string{"edit", "fetch", "list"}) || !strings.HasPrefix(e.Description, "Mapped.") {
		t.Errorf("entity %s %v %q", e.Name, actionNames(e), e.Description)
	}
	if a, ok := e.Action("fetch"); !ok || a.Op.ID != "FetchAccount" {
		t.Errorf("Action(fetch) = %v %v", a, ok)
	}
	if _, ok := api.Operation("getWidget"); ok {
		t.Error("an unmapped operation is in the registry")
	}
	if len(api.Problems) != 1 || !strings.Contains(api.Problems[0], "noSuchOp") {
		t.Errorf("problems %v", api.Problems)
	}
	if _, err := Compile([]byte("openapi: 3.0.0\ninfo: {title: x, version: '1'}\npaths: {}\n"), []byte("{")); !errors.Is(err, switchboard.ErrInvalid) {
		t.Errorf("bad mapping: %v", err)
	}
}

func TestCompileExtensionsAndSwagger(t *testing.T) {
	t.Parallel()
	swagger := []byte(`{"swagger": "2.0", "info": {"title": "S", "version": "1"}, "host": "api.example.test", "basePath": "/api",
		"schemes": ["https"], "paths": {"/chat.postMessage": {"post": {"operationId": "chat.postMessage", "tags": ["chat"],
		"consumes": ["application/x-www-form-urlencoded"],
		"parameters": [{"name": "channel", "in": "formData", "type": "string", "required": true}],
		"responses": {"200": {"description": "ok"}}}}}}`)
	api, err := Compile(swagger, nil)
	if err != nil {
		t.Fatalf("Compile swagger: %v", err)
	}
	op, ok := api.Operation("chat.postMessage")
	if !ok || op.Name != "chat_postMessage" || op.Body == nil || op.Body.ContentType != "application/x-www-form-urlencoded" {
		t.Fatalf("swagger op %+v", op)
	}
	if e, ok := api.Entity("chat"); !ok || !slices.Equal(actionNames(e), []string{"post_message"}) {
		t.Errorf("chat entity %v", e)
	}
	for _, bad := range []string{"", "not: [an, openapi", `{"openapi": "3.0.0"`} {
		if _, err := Compile([]byte(bad), nil); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Compile(%q) = %v, want invalid", bad, err)
		}
	}
}

func TestConvertUnresolvedRef(t *testing.T) {
	t.Parallel()
	_, err := newConverter().convert(&openapi3.SchemaRef{Ref: "#/components/schemas/Missing"}, 0)
	if err == nil {
		t.Fatal("unresolved ref converted")
	}
	deep := &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{"string"}}}
	for range 10 {
		deep = &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{"object"}, Properties: openapi3.Schemas{"x": deep}}}
	}
	s, err := newConverter().convert(deep, 0)
	if err != nil {
		t.Fatal(err)
	}
	depth := 0
	for cur := s; cur != nil; cur = cur.Properties["x"] {
		depth++
		if cur.Properties["x"] == nil && !strings.Contains(cur.Description, "nesting limit") {
			t.Errorf("deepest schema %+v not a described placeholder", cur)
		}
	}
	if depth > maxDepth+2 {
		t.Errorf("depth %d not bounded", depth)
	}
	_ = jsonschema.Schema{}
}

func TestNames(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, safe, action, entity string }{
		{"post_oauth2_token#refresh", "post_oauth2_token_refresh", "post_oauth2_token_refresh", "files"},
		{"GetCustomersCustomer", "GetCustomersCustomer", "get", "customers"},
		{"ListAccount", "ListAccount", "list", "account"},
		{"list_guild_members", "list_guild_members", "list_members", "guilds"},
		{"créer", "cr_er", "cr_er", "x"},
	}
	for _, tt := range tests {
		if got := toolSafe(tt.in, 64); got != tt.safe {
			t.Errorf("toolSafe(%q) = %q, want %q", tt.in, got, tt.safe)
		}
		if got := actionName(tt.in, tt.entity); got != tt.action {
			t.Errorf("actionName(%q, %q) = %q, want %q", tt.in, tt.entity, got, tt.action)
		}
	}
	a, b := toolSafe(strings.Repeat("a", 70)+"1", 64), toolSafe(strings.Repeat("a", 70)+"2", 64)
	if a == b || len(a) != 64 || !toolName.MatchString(a) {
		t.Errorf("long names %q %q", a, b)
	}
}

func TestCompiledOperationsBuildRequests(t *testing.T) {
	t.Parallel()
	api := compileWidgets(t, nil)
	tests := []struct {
		op      string
		args    map[string]any
		wantURL string
		wantCT  string
	}{
		{"widgets/update#v2", map[string]any{"widget_id": "w 1", "body": map[string]any{"metadata": map[string]any{"k": "v"}, "parts": []any{"a"}, "note": nil}},
			"http://127.0.0.1:9/v1/widgets/w%201", "application/x-www-form-urlencoded"},
		{"FetchAccount", map[string]any{"Sid": "AC1"}, "http://127.0.0.1:9/v1/Accounts/AC1.json", ""},
		{"listWidgets", map[string]any{"limit": float64(2), "filter": map[string]any{"size": "m"}}, "http://127.0.0.1:9/v1/widgets?limit=2&filter%5Bsize%5D=m", ""},
		{"createWidget", map[string]any{"body": map[string]any{"id": "1", "name": nil}}, "http://127.0.0.1:9/v1/widgets", "application/json"},
	}
	for _, tt := range tests {
		op, _ := api.Operation(tt.op)
		req, err := registry.BuildRequest(t.Context(), registry.Call{Op: op, BaseURL: "http://127.0.0.1:9/v1", Args: tt.args})
		if err != nil {
			t.Errorf("%s: %v", tt.op, err)
			continue
		}
		if req.URL.String() != tt.wantURL || req.Header.Get("Content-Type") != tt.wantCT {
			t.Errorf("%s: %s %q", tt.op, req.URL, req.Header.Get("Content-Type"))
		}
	}
}
