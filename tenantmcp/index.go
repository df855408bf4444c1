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

// Field weights: a term counts this many times per occurrence. The
// values were chosen on testdata/eval.json (TestSearchQuality); the
// entity name adds nothing there (compiled entity names repeat the
// operation's words), so it is not indexed.
const (
	weightName        = 3.0
	weightSummary     = 3.0
	weightAction      = 2.0
	weightParam       = 1.0
	weightPath        = 1.0
	weightLead        = 5.0 // the path's last literal segment: the resource
	weightDescription = 0.3
	// descriptionTerms and summaryTerms bound how much of a long text is
	// indexed: its opening says what the operation does, the rest is
	// detail that drowns the ranking.
	descriptionTerms = 30
	summaryTerms     = 30
)

// BM25 parameters; b is low because the field weights make documents
// long by design.
const (
	bm25K1 = 1.2
	bm25B  = 0.3
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
			add(op.Summary, weightSummary, summaryTerms)
			add(a.Name, weightAction, 0)
			add(verbOf(op), weightAction, 0)
			lead, rest := pathWords(op.Path)
			add(lead, weightLead, 0)
			add(rest, weightPath, 0)
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

// verbOf is what a user says for an operation, from its method and
// whether its path ends with a parameter: listing a collection, getting
// one item, creating in a collection, updating or deleting one.
func verbOf(op *registry.Operation) string {
	p := strings.TrimSuffix(op.Path, "/")
	p, _, _ = strings.Cut(p, "#")
	p, _, _ = strings.Cut(p, "?")
	p = strings.TrimSuffix(p, ".json")
	item := strings.HasSuffix(p, "}")
	switch op.Method {
	case "GET", "HEAD":
		if item {
			return "get"
		}
		return "list all"
	case "POST":
		if item {
			return "update"
		}
		return "create"
	case "PUT", "PATCH":
		return "update"
	case "DELETE":
		return "delete"
	}
	return ""
}

// pathWords are a path's literal segments (its {params} left out): the
// last, which names the resource (or what is done to it), and the rest.
func pathWords(p string) (lead, rest string) {
	var lits []string
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || strings.HasPrefix(seg, "{") || seg == "v1" || seg == "2010-04-01" {
			continue
		}
		lits = append(lits, seg)
	}
	n := max(0, len(lits)-1)
	return strings.Join(lits[n:], " "), strings.Join(lits[:n], " ")
}

// Hit is one scored action.
type Hit struct {
	Entity *registry.Entity
	Action *registry.Action
	Score  float64
}

// Corpus is the document statistics of the indexes one search runs
// over: BM25's inverse document frequency and average length are the
// union's, so that scores of connectors of very different sizes (14
// operations or 500) compare.
type Corpus struct {
	docs   float64
	length float64
	df     map[string]float64
}

// NewCorpus sums the statistics of indexes for the terms of q; an index
// listed twice (two instances of one connector) counts once.
func NewCorpus(q Query, indexes []*Index) *Corpus {
	c := &Corpus{df: map[string]float64{}}
	seen := map[*Index]bool{}
	for _, ix := range indexes {
		if seen[ix] {
			continue
		}
		seen[ix] = true
		c.docs += float64(len(ix.docs))
		c.length += ix.avgLen * float64(len(ix.docs))
		for t := range q.weights {
			c.df[t] += float64(len(ix.postings[t]))
		}
	}
	return c
}

// Search scores every action holding a query term against the corpus;
// filter, when set, keeps only the actions it accepts. Hits are not
// sorted.
func (ix *Index) Search(q Query, c *Corpus, filter func(*registry.Entity, *registry.Action) bool) []Hit {
	scores := map[int]float64{}
	if c == nil || c.docs == 0 {
		c = NewCorpus(q, []*Index{ix})
	}
	avgLen := c.length / c.docs
	for t, qw := range q.weights {
		ps := ix.postings[t]
		if len(ps) == 0 {
			continue
		}
		df := c.df[t]
		idf := math.Log(1 + (c.docs-df+0.5)/(df+0.5))
		for _, p := range ps {
			d := ix.docs[p.doc]
			norm := p.tf * (bm25K1 + 1) / (p.tf + bm25K1*(1-bm25B+bm25B*d.length/avgLen))
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
	// raw are the query's words as written, lower-cased.
	raw []string
}

// synonymWeight is what a synonym of a query word counts.
const synonymWeight = 0.4

// ParseQuery splits text into terms and adds the synonyms of its verbs.
func ParseQuery(text string) Query {
	q := Query{weights: map[string]float64{}}
	q.raw = strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' })
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

// Mentions reports whether the query names text (a connector's id or
// name, an instance's slug) as a whole word, case aside: "post in slack"
// names Slack, "open a pull request" does not name OpenAI.
func (q Query) Mentions(text string) bool {
	name := strings.ToLower(text)
	return name != "" && contains(q.raw, name)
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
	{"delete", "remove", "erase", "destroy", "drop", "cancel", "revoke", "kick", "release"},
	{"update", "change", "edit", "modify", "rename", "set", "patch"},
	{"get", "retrieve", "fetch", "show", "view", "look", "read", "info", "detail"},
	{"list", "all", "show", "every", "browse", "enumerate"},
	{"search", "find", "query", "filter"},
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
	{"collaboration", "access"},
	{"presence", "online", "away"},
	{"reminder", "remind"},
	{"snooze", "pause", "dnd"},
	{"trash", "deleted"},
	{"cost", "spend", "spent"},
	{"me", "logged", "current"},
	{"recent", "recently"},
	{"media", "picture", "mms"},
	{"dm", "direct"},
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
		my our your their we i you them us at as into about please can could would should will want need do does
		so some any via using use up which what who when where how there here than then just also only if not no`) {
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

// rank sorts hits: those of instances the query names first (a user
// who says "in Slack" wants Slack), then by score, then by address for a
// stable order.
func rank(hits []scored) {
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].named != hits[j].named {
			return hits[i].named
		}
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return hits[i].address < hits[j].address
	})
}
