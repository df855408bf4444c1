package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/openapi/specstest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/registry/registrytest"
)

// memoCompiler is openapi.Compile remembering its registries by
// description, so that a test compiles each description once and can
// compare the fresh registry with the compact one built from it.
type memoCompiler struct {
	mu    sync.Mutex
	calls int
	fresh map[string]*registry.Spec
}

func (m *memoCompiler) compile(spec, mapping []byte) (*registry.Spec, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	k := string(spec) + "\x00" + string(mapping)
	if s, ok := m.fresh[k]; ok {
		return s, nil
	}
	s, err := openapi.Compile(spec, mapping)
	if err == nil {
		m.fresh[k] = s
	}
	return s, err
}

// openapiManifest is a minimal manifest of an OpenAPI connector.
func openapiManifest(id, file string) string {
	return fmt.Sprintf(`{"id": %q, "name": %q, "version": "1.0.0", "type": "openapi", "scope": "global",
		"auth": {"type": "api_key", "modes": ["apiKey"], "delivery": "header", "param": "Authorization", "field": "KEY"},
		"env": [{"name": "KEY", "label": "Key", "required": true, "secret": true}],
		"openapi": %q}`, id, id, file)
}

// TestCompiledMatchesFresh loads the six shared vendor descriptions as a
// catalog with the compiled cache, cold (compiled, written) and warm (read
// back), and requires each connector's compact registry to serve what the
// fresh compile does: byte-identical tools/list document and describe
// answers, the same operations with the same parameters and schemas, the
// same validation result for the same arguments and the same upstream
// request.
//
// Each description is a catalog of its own, checked in parallel: the six
// together took 210 s on one core of a loaded machine, near the package's
// ten-minute test timeout.
func TestCompiledMatchesFresh(t *testing.T) {
	dir := specstest.Dir(t)
	for _, name := range []string{"stripe.yaml", "openai.yaml", "box.json", "twilio.json", "slack.json", "discord.json"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			compiledMatchesFresh(t, []string{filepath.Join(dir, name)})
		})
	}
}

// TestCompiledMatchesFreshFixtures is TestCompiledMatchesFresh over the
// compiler's own test descriptions (every parameter style, form and
// multipart encodings, Swagger 2.0), which need no shared files.
func TestCompiledMatchesFreshFixtures(t *testing.T) {
	compiledMatchesFresh(t, []string{"../openapi/testdata/widgets.yaml", "../openapi/testdata/kitchen.yaml", "../openapi/testdata/swagger2.json"})
}

func compiledMatchesFresh(t *testing.T, paths []string) {
	files := map[string]string{}
	var ids []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		id := strings.TrimSuffix(name, filepath.Ext(name))
		ids = append(ids, id)
		files[id+"/connector.json"] = openapiManifest(id, "openapi"+filepath.Ext(name))
		files[id+"/openapi"+filepath.Ext(name)] = string(b)
	}
	cat := os.DirFS(registrytest.Write(t, files))
	memo := &memoCompiler{fresh: map[string]*registry.Spec{}}
	cacheDir := t.TempDir()

	for _, round := range []string{"cold", "warm"} {
		compiled := &registry.Compiled{Dir: cacheDir, Compiler: "test"}
		c, err := registry.LoadCatalogWith(cat, memo.compile, registry.LoadOptions{Compiled: compiled})
		if err != nil {
			t.Fatal(err)
		}
		if p := c.Problems(); len(p) > 0 {
			t.Fatalf("%s: problems: %v", round, p)
		}
		n, cached := compiled.Counts()
		want := [2]int{len(ids), 0}
		if round == "warm" {
			want = [2]int{0, len(ids)}
		}
		if [2]int{n, cached} != want {
			t.Fatalf("%s: compiled %d, read from the cache %d; want %v", round, n, cached, want)
		}
		for _, id := range ids {
			conn, ok := c.Connector(id)
			if !ok {
				t.Fatalf("%s: no connector %s", round, id)
			}
			fresh := memo.fresh[string(conn.Files[conn.Manifest.OpenAPI])+"\x00"]
			if fresh == nil {
				t.Fatalf("%s: %s was not compiled fresh", round, id)
			}
			sameRegistry(t, round+" "+id, fresh, conn.Spec)
		}
	}
	if memo.calls != len(ids) {
		t.Errorf("the compiler ran %d times for %d descriptions over a cold and a warm load", memo.calls, len(ids))
	}
}

// sameRegistry requires the compact registry got to answer as fresh does.
func sameRegistry(t *testing.T, what string, fresh, got *registry.Spec) {
	t.Helper()
	if fresh == got {
		t.Fatalf("%s: the catalog serves the compiler's registry itself, not the compact one", what)
	}
	if !bytes.Equal(fresh.ToolsJSON(), got.ToolsJSON()) {
		t.Fatalf("%s: tools/list documents differ", what)
	}
	if fresh.Title != got.Title || !slices.Equal(fresh.Servers, got.Servers) || !slices.Equal(fresh.Problems, got.Problems) {
		t.Fatalf("%s: title, servers or problems differ", what)
	}
	if len(fresh.Entities) != len(got.Entities) {
		t.Fatalf("%s: %d entities, want %d", what, len(got.Entities), len(fresh.Entities))
	}
	for i, fe := range fresh.Entities {
		ge := got.Entities[i]
		if fe.Name != ge.Name || fe.Compact != ge.Compact || len(fe.Actions) != len(ge.Actions) {
			t.Fatalf("%s: entity %s differs", what, fe.Name)
		}
		sameJSON(t, what+" describe "+fe.Name, func(e *registry.Entity) (any, error) { return e.Describe("") }, fe, ge)
		for j, fa := range fe.Actions {
			ga := ge.Actions[j]
			where := what + " " + fe.Name + "." + fa.Name
			if fa.Name != ga.Name {
				t.Fatalf("%s: action name %s", where, ga.Name)
			}
			sameJSON(t, where+" describe", func(e *registry.Entity) (any, error) { return e.Describe(fa.Name) }, fe, ge)
			fo, gop := fa.Op, ga.Op
			if op, ok := got.Operation(fo.ID); !ok || op != gop {
				t.Fatalf("%s: operation %s not found by id", where, fo.ID)
			}
			if gop.OutputSchema != nil {
				t.Errorf("%s: the compact form keeps an operation output schema", where)
			}
			// Everything of the operation but its output schema.
			f, g := *fo, *gop
			f.OutputSchema = nil
			if a, b := mustJSON(t, f), mustJSON(t, g); !bytes.Equal(a, b) {
				t.Fatalf("%s: operations differ:\n%s\n%s", where, a, b)
			}
			for _, args := range sampleArgs(fo) {
				ef, eg := fo.Validate(args), gop.Validate(args)
				if which(ef) != which(eg) {
					t.Fatalf("%s: Validate(%v): fresh %v, compact %v", where, args, ef, eg)
				}
				if ef == nil {
					sameRequest(t, where, fo, gop, args)
				}
			}
		}
	}
}

// argReason is the part of a validation message that names the first
// argument the schema refused: with several wrong, which one is found
// first varies from call to call (map order), fresh or not.
var argReason = regexp.MustCompile(`argument "[^"]*" does not match its schema[^;]*`)

// which is a validation result with the refused argument's name left out
// when there is one (and so the description of what is expected, cut to
// a length that depends on that name's).
func which(err error) string {
	msg := fmt.Sprint(err)
	if argReason.MatchString(msg) {
		msg, _, _ = strings.Cut(argReason.ReplaceAllString(msg, "argument does not match its schema"), "; expects")
	}
	return msg
}

// sampleArgs are argument sets that exercise an operation's validation:
// none, an unknown one, each argument as a string, as a number, and the
// required ones as objects.
func sampleArgs(op *registry.Operation) []map[string]any {
	out := []map[string]any{{}, {"no_such_argument_x": true}}
	if op.InputSchema == nil {
		return out
	}
	str, num, obj := map[string]any{}, map[string]any{}, map[string]any{}
	for name := range op.InputSchema.Properties {
		str[name], num[name] = "x", 1
	}
	for _, name := range op.InputSchema.Required {
		obj[name] = map[string]any{"id": "x"}
	}
	return append(out, str, num, obj)
}

// sameRequest requires both operations to build the same upstream
// request from args.
func sameRequest(t *testing.T, where string, fresh, got *registry.Operation, args map[string]any) {
	t.Helper()
	build := func(op *registry.Operation) string {
		req, err := registry.BuildRequest(context.Background(), registry.Call{Op: op, BaseURL: "http://127.0.0.1:1", Args: args})
		if err != nil {
			return "error: " + err.Error()
		}
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
		}
		return req.Method + " " + req.URL.String() + " " + req.Header.Get("Content-Type") + "\n" + string(body)
	}
	if a, b := build(fresh), build(got); a != b {
		t.Fatalf("%s: requests differ:\n%s\n%s", where, a, b)
	}
}

func sameJSON(t *testing.T, what string, f func(*registry.Entity) (any, error), fe, ge *registry.Entity) {
	t.Helper()
	a, errA := f(fe)
	b, errB := f(ge)
	if fmt.Sprint(errA) != fmt.Sprint(errB) || !bytes.Equal(mustJSON(t, a), mustJSON(t, b)) {
		t.Fatalf("%s: answers differ", what)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
