package tenantmcp

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/registry"
)

// TestTerms: camelCase, snake_case and dotted names split into words,
// and a word's inflections meet on one stem.
func TestTerms(t *testing.T) {
	got := terms("chat.postMessage get_files_id listVectorStoreFiles")
	want := []string{"chat", "post", "messag", "get", "file", "id", "list", "vector", "store", "file"}
	if !slices.Equal(got, want) {
		t.Errorf("terms = %v, want %v", got, want)
	}
	for _, pair := range [][2]string{{"messages", "messaging"}, {"reminder", "remind"}, {"invitation", "invite"}} {
		if stem(pair[0]) != stem(pair[1]) {
			t.Errorf("stem(%q) = %q, stem(%q) = %q: want one stem", pair[0], stem(pair[0]), pair[1], stem(pair[1]))
		}
	}
}

// TestQueryIntentAndNames: the query's first verb gives the class it
// asks for, and an instance's name leaves the scoring terms unless it is
// all the query says.
func TestQueryIntentAndNames(t *testing.T) {
	for text, want := range map[string]string{
		"remove a member from the team":         classDelete,
		"show me that invoice":                  classRead,
		"show me all our invoices":              classList,
		"fetch that invoice":                    classGet,
		"list the invoices":                     classList,
		"rename the folder":                     classUpdate,
		"add a product to the catalog":          classCreate,
		"cancel the subscription":               classDelete,
		"invoices that were paid in june":       "",
		"which subscriptions are active":        classRead,
		"who is in this channel":                classRead,
		"is the user online":                    classRead,
		"which invoices should I delete":        classDelete,
		"the invoices which were paid in march": "",
	} {
		if got := ParseQuery(text).intent; got != want {
			t.Errorf("intent of %q = %q, want %q", text, got, want)
		}
	}
	q := ParseQuery("refund a Stripe charge").Without("stripe", "Stripe")
	if _, ok := q.weights["stripe"]; ok || q.weights["charg"] != 1 {
		t.Errorf("weights without stripe: %v", q.weights)
	}
	if q := ParseQuery("Stripe").Without("stripe"); q.weights["stripe"] != 1 {
		t.Errorf("a query that is only a name lost it: %v", q.weights)
	}
	// Pronouns are stop words that bring their terms in as synonyms.
	if q := ParseQuery("who am I logged in as"); q.weights["me"] != synonymWeight || q.weights["user"] != synonymWeight {
		t.Errorf("weights of a question about the caller: %v", q.weights)
	}
}

// TestRelatedTerms: a query word meets the index's other forms of it
// (derivations the stemmer leaves apart) at a lower weight, and not
// words that only share an opening.
func TestRelatedTerms(t *testing.T) {
	spec := &registry.Spec{Entities: []*registry.Entity{{Name: "things", Actions: []*registry.Action{
		{Name: "a", Op: &registry.Operation{ID: "addReaction", Method: "PUT", Path: "/messages/{id}/reactions"}},
		{Name: "b", Op: &registry.Operation{ID: "listSubscriptions", Method: "GET", Path: "/subscriptions"}},
		{Name: "c", Op: &registry.Operation{ID: "listChargebacks", Method: "GET", Path: "/chargebacks"}},
		{Name: "d", Op: &registry.Operation{ID: "listTranscripts", Method: "GET", Path: "/transcripts"}},
	}}}}
	ix := NewIndex(spec, nil)
	for query, want := range map[string][]string{
		"react to a message":  {"reaction"},
		"subscribe":           {"subscript"},
		"charge":              nil, // "charg" is too short to relate
		"transfer money":      nil, // "transcript" shares "trans" only
		"chargeback disputes": nil,
	} {
		q := ParseQuery(query).Related([]*Index{ix})
		var got []string
		for term, w := range q.weights {
			if w == relatedWeight {
				got = append(got, term)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("related terms of %q = %v, want %v", query, got, want)
		}
	}
}

// TestSummaryVerb: of two RPC-style operations (every method a POST)
// whose text matches alike, the one whose summary opens with a verb of
// the class the query asks for ("delete": "Removes") comes first.
func TestSummaryVerb(t *testing.T) {
	spec := &registry.Spec{Entities: []*registry.Entity{{Name: "conversations", Actions: []*registry.Action{
		{Name: "invite", Op: &registry.Operation{ID: "conversations.invite", Method: "POST", Path: "/conversations.invite", Summary: "Adds a user to a conversation."}},
		{Name: "kick", Op: &registry.Operation{ID: "conversations.kick", Method: "POST", Path: "/conversations.kick", Summary: "Removes a user from a conversation."}},
	}}}}
	hits := NewIndex(spec, nil).Search(ParseQuery("delete the user from the conversation"), nil, nil)
	slices.SortFunc(hits, func(x, y Hit) int { return cmp.Compare(y.Score, x.Score) })
	if len(hits) != 2 || hits[0].Action.Name != "kick" {
		t.Errorf("hits = %v, want kick first", hits)
	}
}

// TestRankingPriors: of two operations whose text matches alike, the one
// the query's verb asks for, the one on the resource itself rather than
// a nested one, and the one not deprecated come first.
func TestRankingPriors(t *testing.T) {
	op := func(id, method, path string, deprecated bool) *registry.Action {
		return &registry.Action{Name: id, Op: &registry.Operation{ID: id, Name: id, Method: method, Path: path, Summary: "Widgets", Deprecated: deprecated}}
	}
	spec := &registry.Spec{Entities: []*registry.Entity{{Name: "widgets", Actions: []*registry.Action{
		op("a", "GET", "/widgets", false),
		op("b", "DELETE", "/widgets/{id}", false),
		op("c", "GET", "/widgets/{id}", false),
		op("d", "GET", "/things/{thing}/widgets/{id}", false),
		op("e", "GET", "/widgets/{id}/old", true),
	}}}}
	ix := NewIndex(spec, nil)
	top := func(query string) []string {
		hits := ix.Search(ParseQuery(query), nil, nil)
		slices.SortFunc(hits, func(x, y Hit) int {
			switch {
			case x.Score > y.Score:
				return -1
			case x.Score < y.Score:
				return 1
			}
			return 0
		})
		var ids []string
		for _, h := range hits {
			ids = append(ids, h.Action.Op.ID)
		}
		return ids
	}
	if got := top("delete a widget"); got[0] != "b" {
		t.Errorf("delete a widget: %v, want b first", got)
	}
	if got := top("list widgets"); got[0] != "a" {
		t.Errorf("list widgets: %v, want a first", got)
	}
	got := top("get a widget")
	if got[0] != "c" || slices.Index(got, "d") < slices.Index(got, "c") || got[len(got)-1] != "e" {
		t.Errorf("get a widget: %v, want c first, d after it and the deprecated e last", got)
	}
}

// TestSearchKeywords: a connector's own words for a tool (its manifest's
// docs.search_keywords) find the tool's actions, which their text alone
// does not; words past the bounds and tools the connector has not are
// ignored.
func TestSearchKeywords(t *testing.T) {
	spec := &registry.Spec{Entities: []*registry.Entity{
		{Name: "conversations", Actions: []*registry.Action{{Name: "list", Op: &registry.Operation{ID: "conversations.list", Method: "GET", Path: "/conversations.list", Summary: "Lists conversations."}}}},
		{Name: "users", Actions: []*registry.Action{{Name: "list", Op: &registry.Operation{ID: "users.list", Method: "GET", Path: "/users.list", Summary: "Lists users."}}}},
	}}
	found := func(ix *Index, query string) []string {
		var names []string
		for _, h := range ix.Search(ParseQuery(query), nil, nil) {
			names = append(names, h.Entity.Name)
		}
		return names
	}
	if got := found(NewIndex(spec, nil), "the channels"); len(got) != 0 {
		t.Fatalf("without keywords: %v", got)
	}
	long := strings.Repeat("x", maxKeywordBytes+1)
	many := make([]string, maxKeywords)
	for i := range many {
		many[i] = "filler"
	}
	ix := NewIndex(spec, map[string][]string{"conversations": {"channel", "direct message", long}, "users": append(many, "gadgets"), "nothing": {"ghost"}})
	if got := found(ix, "the channels"); !slices.Equal(got, []string{"conversations"}) {
		t.Errorf("the channels: %v", got)
	}
	for _, query := range []string{long, "gadgets", "ghost"} {
		if got := found(ix, query); len(got) != 0 {
			t.Errorf("%.20s…: %v, want nothing", query, got)
		}
	}
}
