package tenantmcp

import (
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/kljensen/snowball/english"

	"github.com/switchboardhq/switchboard/registry"
)

// Index is the search index of one compiled connector: one document per
// entity action, scored with BM25F over the fields of its operation
// (fieldWeights), then adjusted for what the query's verb asks for
// (listing, getting, creating, updating or deleting, or reading when it
// is a question; queryIntent), which the operation's method and path or
// its summary's opening verb say it does, for word pairs it
// shares with the operation's name, summary or path, for the path's depth
// and for deprecation. It is built once per compiled registry (Indexes)
// and read concurrently.
type Index struct {
	docs []doc
	// postings maps a term to the documents holding it and its
	// pseudo-frequency there: the sum over fields of the field's weight
	// times the term's count, normalised by the field's length.
	postings map[string][]posting
	// vocab is the postings' terms, sorted (Related).
	vocab []string
}

// doc is one entity action in the index.
type doc struct {
	entity *registry.Entity
	action *registry.Action
	// class is what the operation does (classOf); depth is how many
	// parameters its path has.
	class string
	// verb is the class of the verb its summary opens with ("Removes a
	// user from a conversation"), "" when it opens otherwise: an RPC-style
	// API (POST /conversations.kick) says in words what its method does
	// not.
	verb  string
	depth int
	// pairs are the adjacent term pairs of its name, summary and path.
	pairs map[[2]string]bool
}

type posting struct {
	doc int
	tf  float64
}

// The fields of an operation the index weighs separately.
const (
	fieldName        = iota // operationId
	fieldSummary            // summary, else the description's first sentence
	fieldResource           // the path's last literal segment
	fieldPath               // the path's other literal segments and its parameters' names
	fieldParams             // query, header and cookie parameter names, each word once
	fieldDescription        // the description's opening
	fieldEntity             // the tool (entity) name
	fieldKeywords           // the connector's search keywords of the tool (registry.Docs.SearchKeywords)
	numFields
)

// fieldWeights and fieldB are each field's BM25F weight and length
// normalisation. They were set on half of testdata/eval.json (the tasks
// at even positions) and checked on the other half (TestSearchQuality
// reports both): a field whose text is terse and chosen (the name, the
// path) weighs more than prose (summary, description), and a long
// summary or description dilutes each of its words.
var (
	fieldWeights = [numFields]float64{3, 0.5, 2, 1, 1, 0.5, 1, 1}
	fieldB       = [numFields]float64{0.8, 0.8, 0.2, 0, 0.5, 0.8, 0.3, 0.3}
)

// Scoring constants.
const (
	bm25K1 = 1.2
	// summaryTerms and descriptionTerms bound how much of a text is
	// indexed: its opening says what the operation does, the rest is
	// detail that drowns the ranking.
	summaryTerms     = 30
	descriptionTerms = 40
	// intentBoost multiplies the score of an operation that does what
	// the query's verb asks (classOf, queryIntent).
	intentBoost = 1.3
	// pairBoost multiplies the score by 1+pairBoost per adjacent word
	// pair the query shares with the operation ("vector store", "payment
	// intent" are one thing, not two words).
	pairBoost = 0.2
	// depthPenalty divides the score by 1+depthPenalty per path
	// parameter: of two operations that match alike, the one on the
	// resource itself is what is wanted more often than one on a nested
	// sub-resource.
	depthPenalty = 0.2
	// deprecatedFactor multiplies a deprecated operation's score.
	deprecatedFactor = 0.5
)

// Bounds of a connector's search keywords (registry.Docs.SearchKeywords).
const (
	maxKeywords     = 32
	maxKeywordBytes = 64
)

// NewIndex indexes every action of spec, with keywords, the connector's
// search keywords by tool name (nil for none).
func NewIndex(spec *registry.Spec, keywords map[string][]string) *Index {
	ix := &Index{postings: map[string][]posting{}}
	if spec == nil {
		return ix
	}
	var all [][numFields][]string
	var total [numFields]float64
	for _, e := range spec.Entities {
		for _, a := range e.Actions {
			if a.Op == nil {
				continue
			}
			f := fieldsOf(e, a.Op)
			f[fieldKeywords] = keywordTerms(keywords[e.Name])
			for i := range f {
				total[i] += float64(len(f[i]))
			}
			all = append(all, f)
			ix.docs = append(ix.docs, doc{entity: e, action: a, class: classOf(a.Op), verb: verbClass(f[fieldSummary]), depth: strings.Count(a.Op.Path, "{"),
				pairs: pairsOf(f[fieldName], f[fieldSummary], append(slices.Clip(f[fieldResource]), f[fieldPath]...))})
		}
	}
	var avg [numFields]float64
	for i := range avg {
		if avg[i] = total[i] / float64(max(1, len(all))); avg[i] == 0 {
			avg[i] = 1
		}
	}
	for d, f := range all {
		tf := map[string]float64{}
		for i, words := range f {
			if fieldWeights[i] == 0 || len(words) == 0 {
				continue
			}
			norm := 1 - fieldB[i] + fieldB[i]*float64(len(words))/avg[i]
			for _, t := range words {
				tf[t] += fieldWeights[i] / norm
			}
		}
		for t, v := range tf {
			ix.postings[t] = append(ix.postings[t], posting{doc: d, tf: v})
		}
	}
	ix.vocab = slices.Sorted(maps.Keys(ix.postings))
	return ix
}

// fieldsOf is the terms of each field of op.
func fieldsOf(e *registry.Entity, op *registry.Operation) [numFields][]string {
	var f [numFields][]string
	f[fieldName] = terms(cmpOr(op.ID, op.Name))
	desc := prose(op.Description)
	summary := op.Summary
	if summary == "" {
		summary = firstSentence(desc)
	}
	f[fieldSummary] = firstN(terms(summary), summaryTerms)
	lead, rest := pathWords(op.Path)
	f[fieldResource] = terms(lead)
	f[fieldPath] = terms(rest)
	var params []string
	for _, p := range op.Params {
		if p.In == "path" {
			f[fieldPath] = append(f[fieldPath], terms(p.Name)...)
			continue
		}
		for _, t := range terms(p.Name) {
			if !slices.Contains(params, t) {
				params = append(params, t)
			}
		}
	}
	f[fieldParams] = params
	f[fieldDescription] = firstN(terms(desc), descriptionTerms)
	f[fieldEntity] = terms(e.Name)
	return f
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// keywordTerms are the terms of a tool's search keywords, within bounds.
func keywordTerms(words []string) []string {
	var out []string
	for _, w := range firstN(words, maxKeywords) {
		if len(w) <= maxKeywordBytes {
			out = append(out, terms(w)...)
		}
	}
	return out
}

// markup is what a description's text holds that is not words about the
// operation: HTML tags, Markdown link targets and URLs.
var markup = regexp.MustCompile(`<[^>]*>|\]\([^)]*\)|https?://\S+`)

func prose(s string) string { return markup.ReplaceAllString(s, " ") }

// firstSentence is the first sentence of s's first line.
func firstSentence(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i+1]
	}
	return s
}

// pairsOf is the set of adjacent term pairs within each list.
func pairsOf(lists ...[]string) map[[2]string]bool {
	m := map[[2]string]bool{}
	for _, l := range lists {
		for i := 1; i < len(l); i++ {
			m[[2]string{l[i-1], l[i]}] = true
		}
	}
	return m
}

// The classes of what an operation does, from its method and whether its
// path ends with a parameter.
const (
	classList   = "list"
	classGet    = "get"
	classCreate = "create"
	classUpdate = "update"
	classDelete = "delete"
	// classRead is what a query asks for that wants to read without
	// saying whether one item or a list ("show me the invoice", "which
	// subscriptions are active"): either read class matches it.
	classRead = "read"
)

// matches reports whether an operation of class does what a query of
// intent asks.
func matches(intent, class string) bool {
	return intent != "" && (class == intent || intent == classRead && (class == classList || class == classGet))
}

// verbClass is the class of the verb summary (its terms) opens with.
func verbClass(summary []string) string {
	if len(summary) == 0 {
		return ""
	}
	c := intentOf[summary[0]]
	if c == classRead {
		return classGet
	}
	return c
}

// classOf is what op does: list a collection, get one item, create in a
// collection, update or delete one.
func classOf(op *registry.Operation) string {
	p := strings.TrimRight(op.Path, "/")
	p, _, _ = strings.Cut(p, "#")
	p, _, _ = strings.Cut(p, "?")
	p = strings.TrimSuffix(p, ".json")
	item := strings.HasSuffix(p, "}")
	switch op.Method {
	case "GET", "HEAD":
		if item {
			return classGet
		}
		return classList
	case "POST":
		if item {
			return classUpdate
		}
		return classCreate
	case "PUT", "PATCH":
		return classUpdate
	case "DELETE":
		return classDelete
	}
	return ""
}

// intentVerbs are the general English verbs a user says for each class.
// The words of classRead ask to read without saying one item or many; a
// list word elsewhere in the query ("show me all ...") makes them
// classList (queryIntent).
var intentVerbs = map[string][]string{
	classList:   {"list", "all", "every", "browse", "enumerate", "recent"},
	classGet:    {"get", "retrieve", "fetch", "lookup", "detail", "info"},
	classRead:   {"show", "view", "see", "display", "read", "look", "check"},
	classCreate: {"create", "add", "new", "make", "start", "open", "insert", "upload", "send", "post", "submit", "generate", "write", "register"},
	classUpdate: {"update", "change", "edit", "modify", "rename", "set", "patch", "replace", "move"},
	classDelete: {"delete", "remove", "erase", "destroy", "drop", "revoke", "cancel", "discard", "release"},
}

// questionWords open a question, which asks to read ("which subscriptions
// are active", "who is in this channel") when no verb says otherwise.
var questionWords = map[string]bool{"which": true, "who": true, "what": true, "whose": true, "how": true, "is": true, "are": true,
	"does": true, "do": true, "did": true, "when": true, "where": true, "whether": true}

// queryIntent is the class a query asks for: its first verb's (a read
// verb's is classList when a list word follows or precedes it), else
// classRead for a question, else "".
func queryIntent(words, raw []string) string {
	intent := ""
	list := false
	for _, t := range words {
		c := intentOf[t]
		list = list || c == classList
		if intent == "" {
			intent = c
		}
	}
	switch {
	case intent == classRead && list:
		return classList
	case intent == "" && len(raw) > 0 && questionWords[raw[0]]:
		return classRead
	}
	return intent
}

// intentOf maps a stemmed verb to its class.
var intentOf = func() map[string]string {
	m := map[string]string{}
	for class, verbs := range intentVerbs {
		for _, v := range verbs {
			m[stem(v)] = class
		}
	}
	return m
}()

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
// over: BM25's inverse document frequency is the union's, so that scores
// of connectors of very different sizes (14 operations or 500) compare.
type Corpus struct {
	docs float64
	df   map[string]float64
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
	for t, qw := range q.weights {
		df := c.df[t]
		idf := math.Log(1 + (c.docs-df+0.5)/(df+0.5))
		for _, p := range ix.postings[t] {
			scores[p.doc] += qw * idf * p.tf / (p.tf + bm25K1)
		}
	}
	hits := make([]Hit, 0, len(scores))
	for i, s := range scores {
		d := &ix.docs[i]
		if filter != nil && !filter(d.entity, d.action) {
			continue
		}
		shared := 0
		for _, p := range q.pairs {
			if d.pairs[p] {
				shared++
			}
		}
		s *= 1 + pairBoost*float64(shared)
		if matches(q.intent, d.class) || matches(q.intent, d.verb) {
			s *= intentBoost
		}
		if d.action.Op.Deprecated {
			s *= deprecatedFactor
		}
		s /= 1 + depthPenalty*float64(d.depth)
		hits = append(hits, Hit{Entity: d.entity, Action: d.action, Score: s})
	}
	return hits
}

// Query is a parsed search query: its terms with their weights (a
// synonym counts less than the word the user wrote), its adjacent term
// pairs, and what its verb asks for.
type Query struct {
	weights map[string]float64
	words   []string
	pairs   [][2]string
	intent  string
	// raw are the query's words as written, lower-cased.
	raw []string
}

// synonymWeight is what a synonym of a query word counts.
const synonymWeight = 0.4

// ParseQuery splits text into terms, adds the synonyms of its nouns and
// finds its first verb's class.
func ParseQuery(text string) Query {
	q := Query{weights: map[string]float64{}}
	q.raw = strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' })
	for _, t := range terms(text) {
		if n := len(q.words); n > 0 && !slices.Contains(q.pairs, [2]string{q.words[n-1], t}) {
			q.pairs = append(q.pairs, [2]string{q.words[n-1], t})
		}
		q.words = append(q.words, t)
		q.weights[t] = 1
	}
	q.intent = queryIntent(q.words, q.raw)
	for _, w := range q.raw {
		for _, t := range pronouns[w] {
			if _, ok := q.weights[t]; !ok {
				q.weights[t] = synonymWeight
			}
		}
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

// Related is q with the terms of indexes that are another form of one of
// the user's words (related), at relatedWeight: a stemmer meets
// inflections ("messages", "messaging") but not every derivation
// ("react" and "reaction", "subscribe" and "subscription").
func (q Query) Related(indexes []*Index) Query {
	var weights map[string]float64
	for t, w := range q.weights {
		if w != 1 || len(t) < relatedPrefix {
			continue
		}
		for _, ix := range indexes {
			for _, r := range ix.related(t) {
				if _, ok := q.weights[r]; ok {
					continue
				}
				if weights == nil {
					weights = maps.Clone(q.weights)
				}
				weights[r] = relatedWeight
			}
		}
	}
	if weights != nil {
		q.weights = weights
	}
	return q
}

// Related terms: two stems are forms of one word when they share a
// prefix of at least relatedPrefix bytes and neither is more than
// relatedSuffix bytes longer than the prefix they share. relatedWeight
// was set as fieldWeights were, on the evaluation tasks at even
// positions: the largest weight that lost none of them.
const (
	relatedPrefix = 5
	relatedSuffix = 3
	relatedWeight = 0.2
)

// related is the terms of ix related to t.
func (ix *Index) related(t string) []string {
	var out []string
	head := t[:relatedPrefix]
	i, _ := slices.BinarySearch(ix.vocab, head)
	for ; i < len(ix.vocab) && strings.HasPrefix(ix.vocab[i], head); i++ {
		v := ix.vocab[i]
		if v == t {
			continue
		}
		p := relatedPrefix
		for p < len(v) && p < len(t) && v[p] == t[p] {
			p++
		}
		if len(v)-p <= relatedSuffix && len(t)-p <= relatedSuffix {
			out = append(out, v)
		}
	}
	return out
}

// Without is q less the terms of names, unless nothing the user wrote
// would be left: a query that names an instance ("refund a Stripe
// charge") has said where to look (rank puts that instance first), and
// the name then only favours the operations whose text repeats it.
func (q Query) Without(names ...string) Query {
	drop := map[string]bool{}
	for _, n := range names {
		for _, t := range terms(n) {
			drop[t] = true
		}
	}
	weights := map[string]float64{}
	left := false
	for t, w := range q.weights {
		if !drop[t] {
			weights[t] = w
			left = left || w == 1
		}
	}
	if !left {
		return q
	}
	q.weights = weights
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

// synonymGroups are general nouns users say for the same thing in an
// API's terms; each word of a group brings the others into a query.
// Verbs are not here: what a verb asks for is the operation's class
// (intentVerbs), not a word of its text. Vendor vocabulary (what one
// product calls a server or a snooze) is left out on purpose: a list of
// such words grows with the evaluation set, not with the connectors.
var synonymGroups = [][]string{
	{"user", "member", "person", "people", "account", "someone", "somebody", "everyone", "everybody", "colleague", "teammate"},
	{"file", "document", "attachment"},
	{"folder", "directory"},
	{"customer", "client", "buyer"},
	{"image", "picture", "photo", "media"},
	{"comment", "reply", "note", "discussion"},
	{"issue", "bug", "ticket"},
	{"repository", "repo"},
	{"text", "sms"},
	{"call", "phone", "dial"},
	{"price", "cost", "pricing", "spend", "spent"},
	{"webhook", "hook"},
	{"search", "find", "query"},
	{"me", "current"},
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

// pronouns are stop words that still say what a query is about: the
// first person is the caller ("who am I", "my teams": operations on the
// current user), "who" asks for people. Each brings its terms in as a
// synonym does.
var pronouns = func() map[string][]string {
	me := []string{stem("me"), stem("current")}
	person := []string{stem("user"), stem("member"), stem("person"), stem("people")}
	return map[string][]string{"i": me, "my": me, "me": me, "myself": me, "mine": me, "who": person, "whom": person}
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

// stem is the Porter2 (Snowball English) stem of a lower-case word, so
// that "messages", "messaging" and "message", or "reminder" and
// "remind", meet.
func stem(w string) string { return english.Stem(w, false) }

// Indexes holds the index of each connector version (its compiled
// registry and its search keywords), built on first use and shared by
// every instance of the connector version.
type Indexes struct {
	mu    sync.Mutex
	cache *lru.Cache[*registry.Connector, *Index]
}

// maxIndexes bounds the indexes kept: a catalog holds a few hundred
// connector versions, and a reload replaces them.
const maxIndexes = 1024

// NewIndexes returns an empty index cache.
func NewIndexes() *Indexes {
	c, _ := lru.New[*registry.Connector, *Index](maxIndexes)
	return &Indexes{cache: c}
}

// Of returns conn's index, building it once.
func (x *Indexes) Of(conn *registry.Connector) *Index {
	if ix, ok := x.cache.Get(conn); ok {
		return ix
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if ix, ok := x.cache.Get(conn); ok {
		return ix
	}
	ix := NewIndex(conn.Spec, conn.Manifest.Docs.SearchKeywords)
	x.cache.Add(conn, ix)
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
