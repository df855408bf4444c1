package tenantmcp_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/openapi/specstest"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/tenantmcp"
	"github.com/switchboardhq/switchboard/tenants"
)

// Search quality bound (recall@5): the goal of issue 16, reached (0.917
// measured; 0.923 on the tuned half, 0.911 on the held-out one), and the
// floor under which TestSearchQuality fails.
const recallFloor = 0.9

// evalTask is one labelled task of testdata/eval.json: what a user asks,
// and the operations (instance:operationId) that accomplish it.
type evalTask struct {
	Task   string   `json:"task"`
	Accept []string `json:"accept"`
}

// evalInstances are the evaluation tenant's instances: the six shared
// vendor descriptions and the built-in OpenAPI connectors.
var evalInstances = []struct{ slug, id, name, file string }{
	{"stripe", "stripe", "Stripe", "shared:stripe.yaml"},
	{"slackapi", "slack-web", "Slack", "shared:slack.json"},
	{"twilio", "twilio", "Twilio", "shared:twilio.json"},
	{"box", "box", "Box", "shared:box.json"},
	{"discord", "discord", "Discord", "shared:discord.json"},
	{"openai", "openai", "OpenAI", "shared:openai.yaml"},
	{"github", "github", "GitHub", "builtin:github"},
	{"slack", "slack", "Slack", "builtin:slack"},
}

// evalTenant compiles the evaluation tenant's connectors (the shared
// descriptions must be there under CI=true) as the catalog does.
func evalTenant(t testing.TB) []*gateway.Target {
	t.Helper()
	dir := specstest.Dir(t)
	targets := make([]*gateway.Target, len(evalInstances))
	errs := make([]error, len(evalInstances))
	var wg sync.WaitGroup
	for i, in := range evalInstances {
		wg.Go(func() {
			var spec, mapping, manifest []byte
			var err error
			m := registry.Manifest{ID: in.id, Name: in.name, Type: registry.TypeOpenAPI}
			if f, ok := strings.CutPrefix(in.file, "shared:"); ok {
				spec, err = os.ReadFile(filepath.Join(dir, f))
			} else {
				// A built-in connector's manifest, as the catalog serves
				// it: its search keywords are the package's.
				folder := filepath.Join("..", "catalog", "builtin", strings.TrimPrefix(in.file, "builtin:"))
				if spec, err = os.ReadFile(filepath.Join(folder, "openapi.json")); err == nil {
					mapping, err = os.ReadFile(filepath.Join(folder, "mapping.json"))
				}
				if err == nil {
					manifest, err = os.ReadFile(filepath.Join(folder, "connector.json"))
				}
				if err == nil {
					err = json.Unmarshal(manifest, &m)
				}
			}
			if err != nil {
				errs[i] = err
				return
			}
			compiled, err := openapi.Compile(spec, mapping)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", in.file, err)
				return
			}
			targets[i] = &gateway.Target{Instance: &tenants.Instance{Slug: in.slug, ConnectorID: in.id, Agents: []string{"bot"}},
				Connector: &registry.Connector{Manifest: m, Spec: compiled}}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return targets
}

// opID is the instance:operationId of a search hit's address.
func opID(targets []*gateway.Target, address string) string {
	parts := strings.Split(address, ".")
	inst, action := parts[0], parts[len(parts)-1]
	tool := strings.Join(parts[1:len(parts)-1], ".")
	for _, t := range targets {
		if t.Instance.Slug != inst {
			continue
		}
		if e, ok := t.Spec().Entity(tool); ok {
			if a, ok := e.Action(action); ok {
				return inst + ":" + a.Op.ID
			}
		}
	}
	return address + "?"
}

// evalScore is recall@1, recall@5 and MRR over a set of tasks.
type evalScore struct {
	n, at1, at5 int
	rr          float64
}

func (s *evalScore) add(rank int) {
	s.n++
	if rank == 1 {
		s.at1++
	}
	if rank >= 1 && rank <= 5 {
		s.at5++
	}
	if rank > 0 {
		s.rr += 1 / float64(rank)
	}
}

func (s evalScore) recall5() float64 { return float64(s.at5) / float64(max(1, s.n)) }

func (s evalScore) String() string {
	n := float64(max(1, s.n))
	return fmt.Sprintf("%3d tasks: recall@1 %.3f, recall@5 %.3f, MRR %.3f", s.n, float64(s.at1)/n, float64(s.at5)/n, s.rr/n)
}

// TestSearchQuality measures search over the labelled tasks of
// testdata/eval.json across a tenant with every evaluation connector
// installed: recall@1, recall@5 and MRR (over the first 10 hits), on the
// whole set and on each half. The ranking's weights were set on the
// tasks at even positions only; the odd ones are held out, so that the
// gap between the halves shows how much of the figure is fitted to the
// set. The test fails below recallFloor, the goal (recall@5 0.9, issue
// 16), and on any change to the known misses (knownMissesFile): a task
// that is missed and not listed, or listed and found.
func TestSearchQuality(t *testing.T) {
	t.Parallel()
	tasks, knownMisses := readEvalTasks(t)
	if len(tasks) < 150 {
		t.Fatalf("%d tasks, want at least 150", len(tasks))
	}
	targets := evalTenant(t)
	known := map[string]bool{}
	for _, tg := range targets {
		for _, e := range tg.Spec().Entities {
			for _, a := range e.Actions {
				known[tg.Instance.Slug+":"+a.Op.ID] = true
			}
		}
	}
	var all evalScore
	var halves [2]evalScore
	perInstance := map[string]*evalScore{}
	for i, task := range tasks {
		for _, a := range task.Accept {
			if !known[a] {
				t.Errorf("task %q accepts %s, which no evaluation connector has", task.Task, a)
			}
		}
		res, err := tenantmcp.SearchTargets(targets, tenantmcp.SearchArgs{Query: task.Task, Limit: 10})
		if err != nil {
			t.Fatalf("%q: %v", task.Task, err)
		}
		rank := 0
		var got []string
		for i, h := range res.Results {
			id := opID(targets, h.Address)
			got = append(got, id)
			if rank == 0 && slices.Contains(task.Accept, id) {
				rank = i + 1
			}
		}
		inst, _, _ := strings.Cut(task.Accept[0], ":")
		if perInstance[inst] == nil {
			perInstance[inst] = &evalScore{}
		}
		perInstance[inst].add(rank)
		all.add(rank)
		halves[i%2].add(rank)
		missed := rank == 0 || rank > 5
		if missed {
			t.Logf("miss (rank %d): %q want %v, got %v", rank, task.Task, task.Accept, got[:min(5, len(got))])
		}
		checkMiss(t, knownMisses.notInFirst5, task.Task, missed, fmt.Sprintf("rank %d", rank))
	}
	t.Logf("search quality, all       %s", all)
	t.Logf("search quality, tuned on  %s (even positions)", halves[0])
	t.Logf("search quality, held out  %s (odd positions)", halves[1])
	for _, in := range evalInstances {
		if c := perInstance[in.slug]; c != nil {
			t.Logf("  %-9s recall@5 %d/%d", in.slug, c.at5, c.n)
		}
	}
	if r5 := all.recall5(); r5 < recallFloor {
		t.Errorf("recall@5 %.3f, want at least %.2f", r5, recallFloor)
	}
}
