package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	switchboard "github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

func analyzeFile(t *testing.T, file string) *Result {
	t.Helper()
	spec, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Analyze(spec, nil)
	if err != nil {
		t.Fatalf("Analyze(%s): %v", file, err)
	}
	return r
}

func schemaJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestKitchenLoading covers issue 4 §2 and §4 on the kitchen fixture.
func TestKitchenLoading(t *testing.T) {
	t.Parallel()
	r := analyzeFile(t, "testdata/kitchen.yaml")
	api := r.Spec
	checkAPI(t, api)
	if !slices.Equal(api.Servers, []string{"https://eu.kitchen.example.test/v2"}) {
		t.Errorf("servers %v: variables not substituted by their defaults", api.Servers)
	}
	op := func(id string) *registry.Operation {
		t.Helper()
		o, ok := api.Operation(id)
		if !ok {
			t.Fatalf("operation %s missing", id)
		}
		return o
	}
	tests := []struct {
		name, id, want string
		absent         string
	}{
		{"YAML 1.1 dates stay strings", "listPets", `"since":{"type":"string","enum":["2023-10-16","2024-01-02"]}`, ""},
		{"$ref with a sibling keeps the sibling", "createPet", `"description":"The pet to create (a $ref with a sibling)."`, ""},
		{"discriminator property required in each branch", "createPet", `"required":["name","kind"]`, ""},
		{"3.1 type arrays", "createPet", `"lives":{"type":["integer","null"],"maximum":9}`, ""},
		{"reference into the middle of a component", "replacePet", `"kind":{"const":"cat"}`, ""},
		{"allOf merged", "createOrder", `"required":["name","price"]`, `allOf`},
		{"cycle cut with a described placeholder", "createOrder", `(recursive reference to Node, not expanded)`, `$ref`},
		{"json-patch body", "patchPet", `"body":{"type":"array","items":{"type":"object"`, ""},
	}
	for _, tt := range tests {
		got := schemaJSON(t, op(tt.id).InputSchema)
		if !strings.Contains(got, tt.want) || tt.absent != "" && strings.Contains(got, tt.absent) {
			t.Errorf("%s: %s schema %s\nwant it to contain %s", tt.name, tt.id, got, tt.want)
		}
	}
	if op("patchPet").Body.ContentType != "application/json-patch+json" || op("putBlob").Body.ContentType != "application/octet-stream" {
		t.Errorf("body content types %q %q", op("patchPet").Body.ContentType, op("putBlob").Body.ContentType)
	}
	if enc := op("createOrder").Body.Encoding["metadata"]; enc.Style != "deepObject" {
		t.Errorf("form encoding not kept: %+v", op("createOrder").Body.Encoding)
	}

	// Names: invalid and long operationIds, clashing parameter names.
	get := op("pets/get#v2")
	if get.Name != "pets_get_v2" || get.ID != "pets/get#v2" {
		t.Errorf("name %q id %q", get.Name, get.ID)
	}
	long := op("uploadPhotoForAnAccountWithAnExtremelyLongOperationIdentifierThatKeepsGoingOnAndOn")
	if len(long.Name) > 64 || !toolName.MatchString(long.Name) {
		t.Errorf("long name %q", long.Name)
	}
	var args []string
	for _, p := range get.Params {
		args = append(args, p.In+":"+p.Name+"="+p.ArgName())
	}
	if !slices.Equal(args, []string{"path:pet_id=pet_id", "query:action=query_action", "header:pet_id=header_pet_id"}) {
		t.Errorf("clashing parameters: %v", args)
	}

	// One bad operation is left out and reported; webhooks are not tools.
	if _, ok := api.Operation("badOrder"); ok {
		t.Error("badOrder is in the registry")
	}
	if len(api.Problems) != 1 || !strings.Contains(api.Problems[0], "badOrder") {
		t.Errorf("problems %v", api.Problems)
	}
	var paths []string
	for _, f := range r.Findings {
		paths = append(paths, f.Path)
	}
	for _, want := range []string{"$.paths['/orders/{order_id}/bad'].get", "$.paths['/pets/{pet_id}'].get.operationId", "$.paths['/pets/{pet_id}'].get.parameters"} {
		if !slices.Contains(paths, want) {
			t.Errorf("no finding at %s: %v", want, paths)
		}
	}
	if _, ok := api.Entity("pet_added"); ok {
		t.Error("a webhook became a tool")
	}

	// Stable: a second compilation gives the same tools and mapping.
	again := analyzeFile(t, "testdata/kitchen.yaml")
	if !bytes.Equal(again.Spec.ToolsJSON(), api.ToolsJSON()) || schemaJSON(t, again.Mapping) != schemaJSON(t, r.Mapping) {
		t.Error("compilation is not deterministic")
	}
}

// TestKitchenRequests checks the wire format of compiled operations (§3).
func TestKitchenRequests(t *testing.T) {
	t.Parallel()
	api := analyzeFile(t, "testdata/kitchen.yaml").Spec
	tests := []struct {
		id    string
		args  string
		url   string
		ct    string
		body  string
		check func(t *testing.T, h map[string][]string, body []byte)
	}{
		{id: "listPets", args: `{"session": "s1", "limit": 2, "tags": ["a", "b"], "ids": ["1", "2"], "words": ["x", "y"], "colors": ["red", "blue"],
			"filter": {"kind": "cat", "age": {"gt": 1}}, "where": {"name": "Tom"}, "X-Request-Tag": "t", "since": "2024-01-02"}`,
			url: "https://eu.kitchen.example.test/v2/pets?limit=2&tags=a%2Cb&ids=1%7C2&words=x+y&colors=red&colors=blue&filter%5Bage%5D%5Bgt%5D=1&filter%5Bkind%5D=cat&where=%7B%22name%22%3A%22Tom%22%7D&since=2024-01-02",
			check: func(t *testing.T, h map[string][]string, _ []byte) {
				if h["Cookie"][0] != "session=s1" || h["X-Request-Tag"][0] != "t" {
					t.Errorf("cookie/header %v", h)
				}
			}},
		{id: "pets/get#v2", args: `{"pet_id": "p 1", "query_action": "x", "header_pet_id": "h"}`,
			url: "https://eu.kitchen.example.test/v2/pets/p%201?action=x",
			check: func(t *testing.T, h map[string][]string, _ []byte) {
				if h["Pet_id"][0] != "h" {
					t.Errorf("header %v", h)
				}
			}},
		{id: "createOrder", args: `{"body": {"name": "n", "price": 3, "metadata": {"k": "v"}, "items": [{"sku": "s", "qty": 2}], "expand": ["a"], "notes": ["x", "y"], "tree": {"label": "r", "children": [{"label": "c"}]}}}`,
			url: "https://eu.kitchen.example.test/v2/orders", ct: "application/x-www-form-urlencoded",
			body: "expand%5B0%5D=a&items%5B0%5D%5Bqty%5D=2&items%5B0%5D%5Bsku%5D=s&metadata%5Bk%5D=v&name=n&notes=x&notes=y&price=3&tree%5Bchildren%5D%5B0%5D%5Blabel%5D=c&tree%5Blabel%5D=r"},
		{id: "patchPet", args: `{"pet_id": "p", "body": [{"op": "remove", "path": "/a"}]}`,
			url: "https://eu.kitchen.example.test/v2/pets/p", ct: "application/json-patch+json", body: `[{"op":"remove","path":"/a"}]`},
		{id: "putBlob", args: `{"key": "k", "body": "raw"}`, url: "https://eu.kitchen.example.test/v2/blobs/k", ct: "application/octet-stream", body: "raw"},
		{id: "uploadPhotoForAnAccountWithAnExtremelyLongOperationIdentifierThatKeepsGoingOnAndOn",
			args: `{"Sid": "ACab12", "PhotoSid": "PH1", "body": {"file": "DATA", "caption": "c", "meta": {"w": 2}, "labels": ["a", "b"]}}`,
			url:  "https://eu.kitchen.example.test/v2/Accounts/ACab12/Photos/PH1.json",
			check: func(t *testing.T, h map[string][]string, body []byte) {
				_, params, err := mime.ParseMediaType(h["Content-Type"][0])
				if err != nil {
					t.Fatal(err)
				}
				mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
				parts := map[string][]string{}
				for {
					p, err := mr.NextPart()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(p)
					parts[p.FormName()] = append(parts[p.FormName()], p.Header.Get("Content-Type")+"|"+p.FileName()+"|"+string(b))
				}
				want := map[string][]string{
					"file": {"application/octet-stream|file|DATA"}, "caption": {"|" + "|c"},
					"meta": {`application/json||{"w":2}`}, "labels": {"||a", "||b"},
				}
				if fmt.Sprint(parts) != fmt.Sprint(want) {
					t.Errorf("parts %v\nwant %v", parts, want)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			o, _ := api.Operation(tt.id)
			var args map[string]any
			if err := json.Unmarshal([]byte(tt.args), &args); err != nil {
				t.Fatal(err)
			}
			req, err := registry.BuildRequest(t.Context(), registry.Call{Op: o, BaseURL: api.Servers[0], Args: args})
			if err != nil {
				t.Fatalf("BuildRequest: %v", err)
			}
			if req.URL.String() != tt.url {
				t.Errorf("url %s\nwant %s", req.URL, tt.url)
			}
			if tt.ct != "" && req.Header.Get("Content-Type") != tt.ct {
				t.Errorf("content type %q", req.Header.Get("Content-Type"))
			}
			var body []byte
			if req.Body != nil {
				body, _ = io.ReadAll(req.Body)
			}
			if tt.body != "" && string(body) != tt.body {
				t.Errorf("body %s\nwant %s", body, tt.body)
			}
			if tt.check != nil {
				tt.check(t, req.Header, body)
			}
		})
	}
	// Validation before sending names what the action expects.
	o, _ := api.Operation("listPets")
	err := o.Validate(map[string]any{"limit": float64(99)})
	if switchboard.CodeOf(err) != "invalid_arguments" || !strings.Contains(err.Error(), "missing required session") || !strings.Contains(err.Error(), "session (string, required)") {
		t.Errorf("Validate = %v", err)
	}
}

func TestSwagger2Normalised(t *testing.T) {
	t.Parallel()
	r := analyzeFile(t, "testdata/swagger2.json")
	checkAPI(t, r.Spec)
	if !slices.Equal(r.Spec.Servers, []string{"https://chatter.example.test/api"}) {
		t.Errorf("servers %v", r.Spec.Servers)
	}
	post, ok := r.Spec.Operation("chat.postMessage")
	if !ok || post.Body == nil || post.Body.ContentType != "application/x-www-form-urlencoded" || !slices.Equal(post.Body.Schema.Required, []string{"channel"}) {
		t.Fatalf("chat.postMessage %+v", post)
	}
	if up, _ := r.Spec.Operation("files.upload"); up == nil || up.Body == nil || up.Body.ContentType != "multipart/form-data" || up.Body.Schema.Properties["file"].Format != "binary" {
		t.Errorf("files.upload %+v", up)
	}
	norm := normaliseSwagger2(map[string]any{
		"a": map[string]any{"type": []any{"null", "string"}},
		"b": map[string]any{"type": []any{"object", "null", "array"}},
		"c": map[string]any{"items": []any{map[string]any{"$ref": "#/x"}, map[string]any{"type": "null"}}},
	})
	want := `{"a":{"type":"string","x-nullable":true},"b":{"x-nullable":true},"c":{"items":{"$ref":"#/x"}}}`
	if got := schemaJSON(t, norm); got != want {
		t.Errorf("normalised %s\nwant %s", got, want)
	}
}

func TestExternalRefsRefused(t *testing.T) {
	t.Parallel()
	spec, err := os.ReadFile("testdata/external.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(spec, nil)
	if !errors.Is(err, switchboard.ErrInvalid) || switchboard.CodeOf(err) != "external_reference" ||
		!strings.Contains(err.Error(), `"schemas/thing.yaml#/Thing"`) || !strings.Contains(err.Error(), `"https://schemas.example.test/thing.json"`) {
		t.Errorf("Compile = %v", err)
	}
}

// bigSpec is a description of 70 resources of 6 operations each, with
// long parameter lists: more tools and more schema than the budgets allow.
func bigSpec() []byte {
	var b strings.Builder
	b.WriteString(`{"openapi": "3.0.3", "info": {"title": "Big", "version": "1"}, "servers": [{"url": "https://big.example.test"}], "paths": {`)
	for i := range 70 {
		res := fmt.Sprintf("res%02d_items", i)
		if i%10 < 3 {
			res = fmt.Sprintf("grp%d_part%d", i/10, i%10)
		}
		var params []string
		for p := range 12 {
			params = append(params, fmt.Sprintf(`{"name": "filter_%d", "in": "query", "description": "A filter with a rather long description to take room in the schema.", "schema": {"type": "string"}}`, p))
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"/%s": {"get": {"operationId": "list_%s", "summary": "List them", "parameters": [%s], "responses": {"200": {"description": "ok"}}},
			"post": {"operationId": "create_%s", "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"name": {"type": "string"}}}}}}, "responses": {"200": {"description": "ok"}}}},
			"/%s/{id}": {"parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
			"get": {"operationId": "get_%s", "responses": {"200": {"description": "ok"}}},
			"put": {"operationId": "replace_%s", "responses": {"200": {"description": "ok"}}},
			"patch": {"operationId": "update_%s", "responses": {"200": {"description": "ok"}}},
			"delete": {"operationId": "delete_%s", "responses": {"200": {"description": "ok"}}}}`,
			res, res, strings.Join(params, ","), res, res, res, res, res, res)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// TestContextBudget covers §5: few tools, a bounded tools/list, every
// operation reachable, every action's parameters one describe away.
func TestContextBudget(t *testing.T) {
	t.Parallel()
	api, err := Compile(bigSpec(), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkAPI(t, api)
	if n := len(api.Entities); n > MaxEntities {
		t.Errorf("%d entities, want at most %d", n, MaxEntities)
	}
	if n := api.ToolsListSize(); n > ToolsBudget {
		t.Errorf("tools/list of %d bytes, over %d", n, ToolsBudget)
	}
	first, again := api.ToolsJSON(), api.ToolsJSON()
	if !json.Valid(first) || &first[0] != &again[0] {
		t.Error("ToolsJSON is not valid JSON or not cached")
	}
	reached := map[string]bool{}
	for _, e := range api.Entities {
		for _, a := range e.Actions {
			reached[a.Op.ID] = true
			if a.Name == registry.DescribeAction {
				t.Errorf("%s: an operation took the describe action's name", e.Name)
			}
		}
		enum := e.InputSchema.Properties["action"].Enum
		if enum[len(enum)-1] != registry.DescribeAction || len(enum) != len(e.Actions)+1 {
			t.Errorf("%s: action enum %v", e.Name, enum)
		}
		// describe returns the full schema, with nothing sent upstream.
		a := e.Actions[0]
		doc, err := e.Describe(a.Name)
		if err != nil {
			t.Fatalf("Describe: %v", err)
		}
		var d struct {
			Action      string          `json:"action"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(doc, &d); err != nil || d.Action != a.Name || string(d.InputSchema) != schemaJSON(t, a.Op.InputSchema) {
			t.Errorf("Describe(%s) = %s", a.Name, doc)
		}
	}
	if len(reached) != 70*6 {
		t.Errorf("%d of %d operations reachable", len(reached), 70*6)
	}
	if _, ok := api.Entity("grp1"); !ok {
		t.Error("entities sharing a first word were not merged")
	}
	if e, ok := api.Entity("other"); !ok || !e.Compact || !strings.HasPrefix(e.Description, "Other operations:") {
		t.Errorf("no compact 'other' entity: %v", e)
	}
	e := api.Entities[0]
	if _, err := e.Describe("nope"); switchboard.CodeOf(err) != "invalid_arguments" {
		t.Errorf("Describe(nope) = %v", err)
	}
	if doc, err := e.Describe(""); err != nil || !strings.Contains(string(doc), `"actions"`) {
		t.Errorf("Describe() = %s %v", doc, err)
	}
}

// TestAnnotations covers §8.
func TestAnnotations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		methods []string
		want    registry.Annotations
		mcp     string
	}{
		{[]string{"GET", "HEAD"}, registry.Annotations{ReadOnly: true, Idempotent: true}, `{"readOnlyHint":true,"idempotentHint":true}`},
		{[]string{"GET", "DELETE"}, registry.Annotations{Destructive: true, Idempotent: true}, `{"idempotentHint":true}`},
		{[]string{"PUT"}, registry.Annotations{Idempotent: true}, `{"destructiveHint":false,"idempotentHint":true}`},
		{[]string{"GET", "POST"}, registry.Annotations{}, `{"destructiveHint":false}`},
	}
	for _, tt := range tests {
		var actions []*registry.Action
		for _, m := range tt.methods {
			actions = append(actions, &registry.Action{Name: m, Op: &registry.Operation{Method: m}})
		}
		got := annotations(actions)
		if got != tt.want || schemaJSON(t, got.MCP()) != tt.mcp {
			t.Errorf("%v: %+v %s", tt.methods, got, schemaJSON(t, got.MCP()))
		}
	}
}

// TestGenerate covers §1: the package, its determinism, and lint.
func TestGenerate(t *testing.T) {
	t.Parallel()
	spec, err := os.ReadFile("testdata/kitchen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p1, err := Generate(spec, nil, GenerateOptions{SpecName: "kitchen.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := Generate(spec, nil, GenerateOptions{SpecName: "kitchen.yaml"})
	for name, b := range p1.Files {
		if !bytes.Equal(b, p2.Files[name]) {
			t.Errorf("%s differs between runs", name)
		}
	}
	if !bytes.Equal(p1.Files["openapi.yaml"], spec) {
		t.Error("the description is not copied unchanged")
	}
	var m registry.Manifest
	if err := json.Unmarshal(p1.Files[ManifestFile], &m); err != nil {
		t.Fatal(err)
	}
	if m.ID != "kitchen-sink" || m.Version != "1.0.0" || !strings.Contains(m.Docs.LLMShortDescription, "(API version 2024-01-02)") || m.Mapping != MappingFile || m.OpenAPI != "openapi.yaml" ||
		m.BaseURL != "https://{ENV:KITCHEN_REGION}.kitchen.example.test/{ENV:KITCHEN_VERSION}" ||
		m.Auth.Delivery != "header" || m.Auth.Param != "X-Kitchen-Key" || m.Auth.Field != "KITCHEN_API_KEY" ||
		m.Description != "A description that exercises the compiler." {
		t.Errorf("manifest %s", p1.Files[ManifestFile])
	}
	if f, ok := m.Field("KITCHEN_REGION"); !ok || f.Default != "eu" || !strings.Contains(f.Description, "One of: eu, us.") {
		t.Errorf("region field %+v", f)
	}
	if f, ok := m.Field("KITCHEN_API_KEY"); !ok || !f.Secret || !f.Required {
		t.Errorf("key field %+v", f)
	}

	// The package lints clean but for warnings, and compiles with its
	// mapping to the same tools.
	fsys := fstest.MapFS{}
	for name, b := range p1.Files {
		fsys[name] = &fstest.MapFile{Data: b}
	}
	written := LintPackage(fsys)
	for _, f := range written {
		if f.Severity == SeverityError {
			t.Errorf("lint: %s", f)
		}
	}
	// Package.Lint, which skips the second compilation, finds the same.
	if fast := p1.Lint(); fmt.Sprint(fast) != fmt.Sprint(written) {
		t.Errorf("Package.Lint = %v, LintPackage of the written files = %v", fast, written)
	}
	again, err := Compile(spec, p1.Files[MappingFile])
	if err != nil || !bytes.Equal(again.ToolsJSON(), p1.Result.Spec.ToolsJSON()) {
		t.Errorf("compiling with the written mapping gives other tools: %v", err)
	}

	// Lint reports errors with JSON paths.
	bad := fstest.MapFS{}
	for name, f := range fsys {
		bad[name] = f
	}
	var broken map[string]any
	json.Unmarshal(p1.Files[ManifestFile], &broken)
	broken["auth"].(map[string]any)["field"] = "NOPE"
	broken["base_url"] = "{ENV:GONE}"
	b, _ := json.Marshal(broken)
	bad[ManifestFile] = &fstest.MapFile{Data: b}
	bad[MappingFile] = &fstest.MapFile{Data: []byte(`{"entities": {"pets": {"actions": {"list": "listPets", "ghost": "noSuchOp"}}}}`)}
	got := map[string]string{}
	for _, f := range LintPackage(bad) {
		if f.Severity == SeverityError {
			got[f.File+" "+f.Path] = f.Message
		}
	}
	for _, want := range []string{"connector.json $.auth.field", "connector.json $.base_url", "mapping.json $.entities['pets'].actions['ghost']"} {
		if _, ok := got[want]; !ok {
			t.Errorf("no lint error at %s: %v", want, got)
		}
	}
}
