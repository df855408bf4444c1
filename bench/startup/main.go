// Command startup measures how Switchboard starts with a large catalog.
//
// It writes a catalog of 100 OpenAPI connectors (by default): the shared
// vendor descriptions (../shared/specs, found as package specstest finds
// them) as the Stripe-size ones, repeated to reach -large (each repeat
// differs by trailing whitespace only, so that every package has its own
// content hash and is compiled on its own), plus -small synthetic
// descriptions generated here. It then builds and starts the real server
// (switchboard serve, embedded store, a fresh data directory) twice on
// that catalog: cold (no compiled registries cached) and warm (the same
// data directory, so they are). For each start it reports the time from
// process start to the first 200 of /readyz, the resident memory once
// ready (VmRSS, after a short settle, and the peak VmHWM), and the latency
// of the first App mode call of a Stripe-size and of a small connector
// against a loopback upstream; then the goals with pass or fail.
//
//	go run ./bench/startup [-large 10] [-small 90] [-settle 3s]
//
// With -instances N it measures app instances instead (see runInstances):
// N GitHub instances across -tenants tenants on a fresh PostgreSQL
// database (SWITCHBOARD_TEST_DATABASE_URL or 127.0.0.1:5432).
//
//	go run ./bench/startup -instances 10000 -tenants 1000
//
// Only loopback is used.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/bench/rig"
	"github.com/switchboardhq/switchboard/registry"
)

// specsRel is where the shared vendor descriptions are, relative to the
// module root (as openapi/specstest).
const specsRel = "../shared/specs"

// heaviestConnector and heaviestOp are the operation with the largest
// input schema of the shared descriptions (188 KB as the compiler writes
// it; no argument is required): its first call measures the first use of
// a large schema.
const (
	heaviestConnector = "openai-1"
	heaviestOp        = "Getinputtokencounts"
)

// vendorSpecs are the shared descriptions, largest first, with an
// operation each that needs no arguments for the first-call measurement.
var vendorSpecs = []struct{ file, firstOp string }{
	{"stripe.yaml", "GetBalance"},
	{"openai.yaml", "listModels"},
	{"twilio.json", ""},
	{"box.json", ""},
	{"slack.json", ""},
	{"discord.json", ""},
}

func main() {
	large := flag.Int("large", 10, "Stripe-size connectors (the shared descriptions, repeated)")
	small := flag.Int("small", 90, "small synthetic connectors")
	settle := flag.Duration("settle", 3*time.Second, "wait after ready before reading the resident memory")
	bin := flag.String("bin", "", "switchboard binary (default: go build it)")
	keep := flag.Bool("keep", false, "keep the temporary directory (catalog, data directory) and print it")
	instances := flag.Int("instances", 0, "instead: measure the memory of this many idle app instances on PostgreSQL (see -tenants)")
	tenantsN := flag.Int("tenants", 1000, "with -instances: tenants the instances are spread across")
	serveUpstream := flag.String("serve-upstream", "", "internal: serve the loopback upstream on this address")
	flag.Parse()
	if *instances > 0 {
		if err := runInstances(*instances, *tenantsN, *bin, *settle); err != nil {
			fmt.Fprintln(os.Stderr, "startup:", err)
			os.Exit(1)
		}
		return
	}
	if *serveUpstream != "" {
		if err := http.ListenAndServe(*serveUpstream, http.HandlerFunc(upstream)); err != nil {
			fmt.Fprintln(os.Stderr, "startup:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*large, *small, *settle, *bin, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "startup:", err)
		os.Exit(1)
	}
}

// upstream answers every request with a small JSON object.
func upstream(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"object":"list","data":[],"ok":true}`)
}

// startResult is what one start measured.
type startResult struct {
	ready          time.Duration
	cpu            time.Duration // the server's user+system CPU until ready
	rssKB, hwmKB   int64
	firstLarge     time.Duration
	firstSmall     time.Duration
	firstHeaviest  time.Duration
	firstLargeName string
}

func run(large, small int, settle time.Duration, bin string, keep bool) error {
	dir, err := os.MkdirTemp("", "switchboard-startup-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if bin, err = rig.ServerBinary(bin, dir); err != nil {
		return err
	}
	specs, err := specsDir()
	if err != nil {
		return err
	}
	catDir := filepath.Join(dir, "catalog")
	firstLarge, firstSmall, bytesTotal, err := writeCatalog(catDir, specs, large, small)
	if err != nil {
		return err
	}
	fmt.Printf("catalog: %d connectors (%d Stripe-size from %s, %d synthetic small), %.1f MB of descriptions\n",
		large+small, large, specsRel, small, float64(bytesTotal)/(1<<20))

	self, err := os.Executable()
	if err != nil {
		return err
	}
	upAddr, err := rig.LoopbackAddr()
	if err != nil {
		return err
	}
	up := exec.Command(self, "-serve-upstream", upAddr)
	up.Stdout, up.Stderr = os.Stderr, os.Stderr
	if err := up.Start(); err != nil {
		return err
	}
	defer func() { up.Process.Kill(); up.Wait() }()

	data := filepath.Join(dir, "data")
	cold, err := start(bin, catDir, data, "http://"+upAddr, firstLarge, firstSmall, settle, true)
	if err != nil {
		return fmt.Errorf("cold start: %w", err)
	}
	warm, err := start(bin, catDir, data, "http://"+upAddr, firstLarge, firstSmall, settle, false)
	if err != nil {
		return fmt.Errorf("warm start: %w", err)
	}
	fmt.Printf("%-6s %10s %12s %12s %12s %16s %16s %16s\n", "start", "ready", "CPU to ready", "RSS ready", "peak RSS", "1st call large", "1st call small", "1st heaviest")
	for _, r := range []struct {
		name string
		res  startResult
	}{{"cold", cold}, {"warm", warm}} {
		fmt.Printf("%-6s %10s %12s %9.0f MB %9.0f MB %16s %16s %16s\n", r.name, r.res.ready.Round(time.Millisecond), r.res.cpu,
			float64(r.res.rssKB)/1024, float64(r.res.hwmKB)/1024, r.res.firstLarge.Round(100*time.Microsecond), r.res.firstSmall.Round(100*time.Microsecond), r.res.firstHeaviest.Round(100*time.Microsecond))
	}
	fmt.Printf("(1st call large: %s of the first Stripe-size connector; 1st heaviest: %s %s; every call through App mode; load average %s)\n",
		cold.firstLargeName, heaviestConnector, heaviestOp, rig.LoadAverage())
	goal("ready, warm", warm.ready.Seconds(), "s", 2)
	goal("ready, cold", cold.ready.Seconds(), "s", 30)
	goal("resident once ready, warm", float64(warm.rssKB)/1024, "MB", 300)
	goal("resident once ready, cold", float64(cold.rssKB)/1024, "MB", 300)
	goal("first call after a warm start", float64(warm.firstLarge.Microseconds())/1000, "ms", 50)
	goal("first call, largest schema, warm", float64(warm.firstHeaviest.Microseconds())/1000, "ms", 50)
	return nil
}

// goal prints a figure against its upper bound with a pass/fail mark.
func goal(what string, v float64, unit string, max float64) {
	mark := "FAIL"
	if v <= max {
		mark = "pass"
	}
	fmt.Printf("%-32s %9.2f %-2s goal <= %g %s  %s\n", what, v, unit, max, unit, mark)
}

// start runs the server once on the catalog and measures it. setup creates
// the tenant, caller and instances first (the cold start); the warm start
// finds them in the store.
func start(bin, catDir, data, upstreamURL, firstLarge, firstSmall string, settle time.Duration, setup bool) (startResult, error) {
	var res startResult
	addr, err := rig.LoopbackAddr()
	if err != nil {
		return res, err
	}
	base := "http://" + addr
	const adminToken = "bench-operator-token"
	srv := exec.Command(bin, "serve", "--addr", addr, "--data-dir", data, "--catalog", catDir,
		"--allow-upstream-cidrs", "127.0.0.1/32", "--log-level", "error")
	srv.Env = append(os.Environ(), "SWITCHBOARD_ADMIN_TOKEN="+adminToken)
	srv.Stdout, srv.Stderr = io.Discard, os.Stderr
	t0 := time.Now()
	if err := srv.Start(); err != nil {
		return res, err
	}
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	if err := rig.WaitReady(base, 5*time.Minute); err != nil {
		return res, err
	}
	res.ready = time.Since(t0)
	res.cpu = rig.CPUTime(srv.Process.Pid)
	time.Sleep(settle)
	res.rssKB, res.hwmKB = rig.Memory(srv.Process.Pid)

	admin := func(method, path string, body any) (map[string]any, error) {
		return rig.Admin(base, adminToken, method, path, body)
	}
	tokenFile := filepath.Join(data, "bench-caller-token")
	if setup {
		if _, err := admin("POST", "/v1/tenants", map[string]any{"slug": "bench", "name": "Bench"}); err != nil {
			return res, err
		}
		caller, err := admin("POST", "/v1/tenants/bench/callers", map[string]any{"name": "bench", "kind": "agent-platform"})
		if err != nil {
			return res, err
		}
		token, _ := caller["token"].(string)
		if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
			return res, err
		}
		for _, id := range []string{firstLarge, firstSmall, heaviestConnector} {
			if _, err := admin("PUT", "/v1/tenants/bench/instances/"+id, map[string]any{
				"connector_id": id, "auth_mode": "apiKey", "agents": []string{"bench-agent"},
				"fields": map[string]any{"API_KEY": "bench-upstream-key", "API_URL": upstreamURL},
			}); err != nil {
				return res, err
			}
		}
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return res, err
	}
	call := func(instance, op string) (time.Duration, error) {
		req, _ := http.NewRequest("POST", base+"/workspaces/bench/apps/"+instance+"/ops/"+op, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+string(token))
		req.Header.Set("X-Agent-Id", "bench-agent")
		req.Header.Set("Content-Type", "application/json")
		t := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t)
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"ok":true`)) {
			return 0, fmt.Errorf("app call %s/%s: %d %s", instance, op, resp.StatusCode, b)
		}
		return d, nil
	}
	if res.firstLarge, err = call(firstLarge, vendorSpecs[0].firstOp); err != nil {
		return res, err
	}
	res.firstLargeName = firstLarge + " " + vendorSpecs[0].firstOp
	if res.firstSmall, err = call(firstSmall, "list_things0"); err != nil {
		return res, err
	}
	if res.firstHeaviest, err = call(heaviestConnector, heaviestOp); err != nil {
		return res, err
	}
	return res, nil
}

// specsDir finds the shared descriptions beside the module root.
func specsDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir := filepath.Join(d, filepath.FromSlash(specsRel))
			if _, err := os.Stat(filepath.Join(dir, vendorSpecs[0].file)); err != nil {
				return "", fmt.Errorf("the shared descriptions are needed: %w", err)
			}
			return dir, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("run from inside the module")
		}
	}
}

// writeCatalog writes the catalog and its index, and returns the ids of
// the connectors the first calls go to and the descriptions' total size.
func writeCatalog(dir, specs string, large, small int) (string, string, int64, error) {
	var idx registry.Index
	idx.Version = registry.IndexVersion
	var total int64
	add := func(id, name, file string, spec []byte) error {
		folder := filepath.Join(dir, id)
		if err := os.MkdirAll(folder, 0o755); err != nil {
			return err
		}
		total += int64(len(spec))
		m := manifest(id, name, file)
		if err := os.WriteFile(filepath.Join(folder, file), spec, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(folder, "connector.json"), m, 0o644); err != nil {
			return err
		}
		idx.Connectors = append(idx.Connectors, registry.IndexEntry{
			ID: id, Name: name, Type: registry.TypeOpenAPI, Scope: "global", Folder: id,
			Requires: []string{"API_KEY"}, Auth: registry.AuthSummary{Type: "api_key"},
		})
		return nil
	}
	firstLarge := ""
	for i := 0; i < large; i++ {
		v := vendorSpecs[i%len(vendorSpecs)]
		spec, err := os.ReadFile(filepath.Join(specs, v.file))
		if err != nil {
			return "", "", 0, err
		}
		// A repeat differs by trailing newlines only: the same API, its
		// own package hash.
		spec = append(spec, bytes.Repeat([]byte("\n"), i/len(vendorSpecs))...)
		base := strings.TrimSuffix(v.file, filepath.Ext(v.file))
		id := fmt.Sprintf("%s-%d", base, i)
		if firstLarge == "" {
			firstLarge = id
		}
		if err := add(id, base+" "+strconv.Itoa(i), "openapi"+filepath.Ext(v.file), spec); err != nil {
			return "", "", 0, err
		}
	}
	firstSmall := ""
	for i := 0; i < small; i++ {
		id := fmt.Sprintf("small-%02d", i)
		if firstSmall == "" {
			firstSmall = id
		}
		if err := add(id, "Small "+strconv.Itoa(i), "openapi.json", smallSpec(i)); err != nil {
			return "", "", 0, err
		}
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return "", "", 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, registry.IndexName), b, 0o644); err != nil {
		return "", "", 0, err
	}
	return firstLarge, firstSmall, total, registry.HashCatalog(dir)
}

// manifest is a connector.json for an API-key connector whose base URL
// is an instance field.
func manifest(id, name, file string) []byte {
	b, _ := json.MarshalIndent(map[string]any{
		"id": id, "name": name, "version": "1.0.0", "type": "openapi", "scope": "global",
		"requires": []string{"API_KEY"},
		"auth": map[string]any{"type": "api_key", "modes": []string{"apiKey"}, "delivery": "header",
			"param": "Authorization", "format": "Bearer {SECRET:API_KEY}", "field": "API_KEY"},
		"env": []map[string]any{
			{"name": "API_KEY", "label": "API key", "required": true, "secret": true},
			{"name": "API_URL", "label": "API base URL", "required": true},
		},
		"docs": map[string]any{
			"llm_short_description": name + ": a synthetic connector of the startup benchmark; its operations reach a loopback upstream.",
		},
		"openapi":  file,
		"base_url": "{ENV:API_URL}",
	}, "", "  ")
	return b
}

// smallSpec generates a small OpenAPI 3.0 description: eight resources,
// each with list, get, create, update and delete, a component schema with
// a dozen properties and a nested object, and query and path parameters.
func smallSpec(n int) []byte {
	paths := map[string]any{}
	schemas := map[string]any{}
	for r := 0; r < 8; r++ {
		thing := fmt.Sprintf("things%d", r)
		ref := map[string]any{"$ref": "#/components/schemas/Thing" + strconv.Itoa(r)}
		props := map[string]any{
			"id":      map[string]any{"type": "string", "description": "Identifier."},
			"created": map[string]any{"type": "integer", "format": "int64"},
			"status":  map[string]any{"type": "string", "enum": []string{"active", "inactive", "archived"}},
			"owner": map[string]any{"type": "object", "properties": map[string]any{
				"id": map[string]any{"type": "string"}, "email": map[string]any{"type": "string", "format": "email"},
			}},
			"tags": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		}
		for p := 0; p < 8; p++ {
			props[fmt.Sprintf("field_%d", p)] = map[string]any{"type": "string", "maxLength": 200, "description": fmt.Sprintf("Field %d of a %s record in API %d.", p, thing, n)}
		}
		schemas["Thing"+strconv.Itoa(r)] = map[string]any{"type": "object", "properties": props, "required": []string{"id"}}
		ok := func(schema any) map[string]any {
			return map[string]any{"200": map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{"schema": schema}}}}
		}
		idParam := map[string]any{"name": "id", "in": "path", "required": true, "schema": map[string]any{"type": "string"}}
		body := map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": ref}}}
		paths["/"+thing] = map[string]any{
			"get": map[string]any{"operationId": "list_" + thing, "summary": "List " + thing, "tags": []string{thing},
				"parameters": []any{
					map[string]any{"name": "limit", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 100}},
					map[string]any{"name": "cursor", "in": "query", "schema": map[string]any{"type": "string"}},
				},
				"responses": ok(map[string]any{"type": "object", "properties": map[string]any{"data": map[string]any{"type": "array", "items": ref}}})},
			"post": map[string]any{"operationId": "create_" + thing, "summary": "Create a " + thing, "tags": []string{thing},
				"requestBody": body, "responses": ok(ref)},
		}
		paths["/"+thing+"/{id}"] = map[string]any{
			"parameters": []any{idParam},
			"get":        map[string]any{"operationId": "get_" + thing, "summary": "Get a " + thing, "tags": []string{thing}, "responses": ok(ref)},
			"patch":      map[string]any{"operationId": "update_" + thing, "summary": "Update a " + thing, "tags": []string{thing}, "requestBody": body, "responses": ok(ref)},
			"delete":     map[string]any{"operationId": "delete_" + thing, "summary": "Delete a " + thing, "tags": []string{thing}, "responses": ok(map[string]any{"type": "object"})},
		}
	}
	b, _ := json.MarshalIndent(map[string]any{
		"openapi":    "3.0.3",
		"info":       map[string]any{"title": fmt.Sprintf("Small API %d", n), "version": "1.0.0"},
		"servers":    []any{map[string]any{"url": "https://api.example.com/v1"}},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	}, "", "  ")
	return b
}
