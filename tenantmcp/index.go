package tenantmcp

import (
	"math"
	"sort"
	"strings"
	"sync"
	"unicode"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/switchboardhq/switchboard/registry"
)

// Index is the search index of one compiled connector: one document per
// entity action, BM25 over its operation name and id, summary,
// description, tool (entity) and action names, path words and parameter
// names. It is built once per compiled registry (Indexes) and read
// concurrently.
type Index struct {
	docs []doc
	// postings maps a term to the documents holding it and its weighted
	// frequency there.
	postings map[string][]posting
	avgLen   float64
}

// doc is one entity action in the index.
type doc struct {
	entity *registry.Entity
	action *registry.Action
	length float64
}

type posting struct {
	doc int
	tf  float64
}

// Field weights: a term counts this many times per occurrence.
const (
	weightName        = 3
	weightSummary     = 3
	weightEntity      = 2
	weightAction      = 2
	weightParam       = 1
	weightPath        = 1
	weightDescription = 1
	// descriptionTerms bounds how much of a long description is indexed:
	// its opening says what the operation does, the rest is detail that
	// drowns the ranking.
	descriptionTerms = 60
)

// BM25 parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// NewIndex indexes every action of spec.
func NewIndex(spec *registry.Spec) *Index {
	ix := &Index{postings: map[string][]posting{}}
	if spec == nil {
		return ix
	}
	var total float64
	for _, e := range spec.Entities {
		for _, a := range e.Actions {
			if a.Op == nil {
				continue
			}
			tf := map[string]float64{}
			add := func(text string, w float64, limit int) {
				for i, t := range terms(text) {
					if limit > 0 && i >= limit {
						break
					}
					tf[t] += w
				}
			}
			op := a.Op
			add(op.Name, weightName, 0)
			add(op.ID, weightName, 0)
			add(op.Summary, weightSummary, 0)
			add(e.Name, weightEntity, 0)
			add(a.Name, weightAction, 0)
			add(methodWords[op.Method], weightAction, 0)
			add(pathWords(op.Path), weightPath, 0)
			for _, p := range op.Params {
				add(p.Name, weightParam, 0)
			}
			add(op.Description, weightDescription, descriptionTerms)
			var n float64
			for t, f := range tf {
				ix.postings[t] = append(ix.postings[t], posting{doc: len(ix.docs), tf: f})
				n += f
			}
			ix.docs = append(ix.docs, doc{entity: e, action: a, length: n})
			total += n
		}
	}
	if len(ix.docs) > 0 {
		ix.avgLen = total / float64(len(ix.docs))
	}
	return ix
}

// methodWords are the verbs a user says for an HTTP method.
var methodWords = map[string]string{
	"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "update", "DELETE": "delete",
}

// pathWords are a path's literal segments (its {params} left out).
func pathWords(p string) string {
	var b strings.Builder
	for _, seg := range strings.Split(p, "/") {
		if strings.HasPrefix(seg, "{") {
			continue
		}
		b.WriteString(seg)
		b.WriteByte(' ')
	}
	return b.String()
}

// Hit is one scored action.
type Hit struct {
	Entity *registry.Entity
	Action *registry.Action
	Score  float64
}

// Search scores every action holding a query term; filter, when set,
// keeps only the actions it accepts. Hits are not sorted.
func (ix *Index) Search(q Query, filter func(*registry.Entity, *registry.Action) bool) []Hit {
	scores := map[int]float64{}
	n := float64(len(ix.docs))
	for t, qw := range q.weights {
		ps := ix.postings[t]
		if len(ps) == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		for _, p := range ps {
			d := ix.docs[p.doc]
			norm := p.tf * (bm25K1 + 1) / (p.tf + bm25K1*(1-bm25B+bm25B*d.length/ix.avgLen))
			scores[p.doc] += qw * idf * norm
		}
	}
	hits := make([]Hit, 0, len(scores))
	for i, s := range scores {
		d := ix.docs[i]
		if filter != nil && !filter(d.entity, d.action) {
			continue
		}
		hits = append(hits, Hit{Entity: d.entity, Action: d.action, Score: s})
	}
	return hits
}

// Query is a parsed search query: its terms with their weights (a
// synonym counts less than the word the user wrote).
type Query struct {
	weights map[string]float64
	words   []string
}

// synonymWeight is what a synonym of a query word counts.
const synonymWeight = 0.4

// ParseQuery splits text into terms and adds the synonyms of its verbs.
func ParseQuery(text string) Query {
	q := Query{weights: map[string]float64{}}
	for _, t := range terms(text) {
		q.words = append(q.words, t)
		q.weights[t] = 1
	}
	for _, t := range q.words {
		for _, s := range synonyms[t] {
			if _, ok := q.weights[s]; !ok {
				q.weights[s] = synonymWeight
			}
		}
	}
	return q
}

// Empty reports whether the query has no term.
func (q Query) Empty() bool { return len(q.words) == 0 }

// Mentions reports whether the query names any of the words of text (a
// connector's id or name, an instance's slug).
func (q Query) Mentions(text string) bool {
	for _, w := range terms(text) {
		if contains(q.words, w) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// synonymGroups are words users say for the same thing; each word of a
// group brings the others into a query.
var synonymGroups = [][]string{
	{"create", "add", "new", "make", "open", "post", "start", "insert"},
	{"delete", "remove", "erase", "destroy", "drop", "cancel", "revoke"},
	{"update", "change", "edit", "modify", "rename", "set", "patch"},
	{"get", "retrieve", "fetch", "show", "view", "look", "read", "info", "detail"},
	{"list", "all", "show", "every", "browse", "enumerate"},
	{"search", "find", "query", "look", "filter"},
	{"send", "post", "write", "message", "deliver"},
	{"user", "member", "person", "people", "account"},
	{"channel", "conversation", "room"},
	{"file", "document", "upload", "attachment"},
	{"folder", "directory"},
	{"customer", "client", "buyer"},
	{"pay", "payment", "charge"},
	{"refund", "reimburse", "return"},
	{"invoice", "bill"},
	{"subscription", "plan", "recurring"},
	{"text", "sms"},
	{"call", "phone", "dial", "voice"},
	{"image", "picture", "photo"},
	{"comment", "reply", "note"},
	{"issue", "bug", "ticket"},
	{"repository", "repo", "project"},
	{"invite", "invitation"},
	{"guild", "server"},
	{"role", "permission"},
	{"emoji", "reaction", "react"},
	{"model", "engine"},
	{"transcription", "transcribe", "audio", "speech"},
	{"embedding", "vector"},
	{"moderation", "moderate", "flag"},
	{"collaboration", "collaborator", "share"},
	{"ban", "block"},
	{"pin", "pinned"},
	{"thread", "reply"},
	{"webhook", "hook", "endpoint"},
	{"price", "cost", "pricing"},
	{"balance", "fund"},
	{"number", "phone"},
	{"schedule", "scheduled", "later"},
	{"archive", "archived"},
	{"merge", "combine"},
}

var synonyms = func() map[string][]string {
	m := map[string][]string{}
	for _, g := range synonymGroups {
		stems := make([]string, len(g))
		for i, w := range g {
			stems[i] = stem(w)
		}
		for _, w := range stems {
			for _, s := range stems {
				if s != w && !contains(m[w], s) {
					m[w] = append(m[w], s)
				}
			}
		}
	}
	return m
}()

// stopWords are left out of documents and queries.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the of to in on for from by with and or is are be it its this that these those
		my our your their me we i you them us at as into about please can could would should will want need do does
		so some any via using use which what who when where how there here than then just also only if not no`) {
		m[w] = true
	}
	return m
}()

// terms splits text into lower-case, stemmed words: camelCase,
// snake_case, dotted and path names are split into their words.
func terms(text string) []string {
	var out []string
	var word []rune
	flush := func() {
		if len(word) == 0 {
			return
		}
		w := strings.ToLower(string(word))
		word = word[:0]
		if len(w) < 2 || stopWords[w] {
			return
		}
		out = append(out, stem(w))
	}
	rs := []rune(text)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && len(word) > 0 {
				prev := rs[i-1]
				nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
				if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
					flush()
				}
			}
			word = append(word, r)
		default:
			flush()
		}
	}
	flush()
	return out
}

// stem strips common English endings, so that "messages", "messaging"
// and "message" meet.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		w = w[:len(w)-3]
	case len(w) > 4 && strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed"):
		w = w[:len(w)-2]
	case len(w) > 4 && (strings.HasSuffix(w, "ses") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes")):
		w = w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us"):
		w = w[:len(w)-1]
	}
	return strings.TrimSuffix(w, "e")
}

// Indexes holds the index of each compiled registry, built on first use
// and shared by every instance of the connector version.
type Indexes struct {
	mu    sync.Mutex
	cache *lru.Cache[*registry.Spec, *Index]
}

// maxIndexes bounds the indexes kept: a catalog holds a few hundred
// connector versions, and a reload replaces them.
const maxIndexes = 1024

// NewIndexes returns an empty index cache.
func NewIndexes() *Indexes {
	c, _ := lru.New[*registry.Spec, *Index](maxIndexes)
	return &Indexes{cache: c}
}

// Of returns spec's index, building it once.
func (x *Indexes) Of(spec *registry.Spec) *Index {
	if ix, ok := x.cache.Get(spec); ok {
		return ix
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if ix, ok := x.cache.Get(spec); ok {
		return ix
	}
	ix := NewIndex(spec)
	x.cache.Add(spec, ix)
	return ix
}

// rank sorts hits by score, then by address for a stable order.
func rank(hits []scored) {
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return hits[i].address < hits[j].address
	})
}
