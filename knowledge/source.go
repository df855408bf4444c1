package knowledge

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

// Call sends one upstream operation for the reader a request is
// authorized as: the MCP endpoint binds it to the instance, the reader's
// credentials, the egress guard and the audit.
type Call func(ctx context.Context, op *registry.Operation, args map[string]any) (*registry.Response, error)

// Entry is one resource of a listing or a read.
type Entry struct {
	URI      string
	Name     string
	MimeType string
	Size     int64
	// Kind is KindFolder or KindFile; Level the level's name.
	Kind  string
	Level string
	// Revision changes whenever the content does (the primary source,
	// else the fallback); "" when the upstream gives neither.
	Revision string
}

// Document is a read: the entry and either Text, Blob (WebDAV binary
// content) or DownloadURL, never two of them; none with metadataOnly or
// for a folder.
type Document struct {
	Entry
	Text        string
	Blob        []byte
	DownloadURL string
}

// Page is one page of a listing.
type Page struct {
	Entries []Entry
	// Next is the opaque cursor of the next page, "" at the end.
	Next string
}

// AccessResult is checkAccess's answer for one URI.
type AccessResult struct {
	URI string `json:"uri"`
	// Access is "allowed", "denied" or "not_found".
	Access string `json:"access"`
	// Code says why, for a denial that is not the upstream's 403.
	Code string `json:"code,omitempty"`
}

// ClampPageSize bounds a requested page size to the source's bounds: 0
// (none asked) is the default, below 1 is 1, above the maximum the
// maximum.
func (s *Source) ClampPageSize(n int) int {
	switch {
	case n == 0:
		return s.PageSize.Default
	case n < 1:
		return 1
	case n > s.PageSize.Maximum:
		return s.PageSize.Maximum
	}
	return n
}

// cursor is the decoded position of a listing. It holds everything the
// next page needs, so that any replica can serve it.
type cursor struct {
	V      int    `json:"v"`
	Parent string `json:"p"`
	Offset int    `json:"o,omitempty"`
	// Up is the upstream's own cursor or next-link query.
	Up string `json:"c,omitempty"`
	// Size is the page size asked for the first page, kept for the
	// next ones unless they ask for another.
	Size int `json:"n,omitempty"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func errInvalidParams(format string, args ...any) error {
	return switchboard.E(switchboard.ErrInvalid, "invalid_params", format, args...)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(s) > 4096 || json.Unmarshal(b, &c) != nil || c.V != 1 || c.Offset < 0 {
		return cursor{}, errInvalidParams("the cursor is not one this server gave")
	}
	return c, nil
}

// ErrResourceNotFound is the error of a URI that names no resource of the
// source, or one the upstream does not find.
func errNotFound(uri string) error {
	if len(uri) > 200 {
		uri = uri[:200] + "…"
	}
	return switchboard.E(switchboard.ErrNotFound, "resource_not_found", "no such resource: %s", uri)
}

// List lists one page of the container parentURI ("" for the root),
// continuing at cur (a cursor this method returned, or ""), pageSize
// entries at most (clamped).
func (s *Source) List(ctx context.Context, call Call, parentURI, cur string, pageSize int) (*Page, error) {
	c := cursor{V: 1}
	if cur != "" {
		var err error
		if c, err = decodeCursor(cur); err != nil {
			return nil, err
		}
		if parentURI != "" && parentURI != c.Parent {
			return nil, errInvalidParams("the cursor belongs to another listing")
		}
		parentURI = c.Parent
	}
	if parentURI == "" {
		parentURI = s.RootURI()
	}
	c.Parent = parentURI
	l, id, ok := s.ParseURI(parentURI)
	if !ok && parentURI == s.RootURI() {
		l, id, ok = s.folderLevel(), s.Root, true
	}
	if !ok {
		return nil, errNotFound(parentURI)
	}
	if l.Kind != KindFolder {
		return nil, errInvalidParams("%s is a document, not a folder: it has no children", parentURI)
	}
	if pageSize == 0 && c.Size != 0 {
		pageSize = c.Size
	}
	n := s.ClampPageSize(pageSize)
	c.Size = n
	if s.Protocol == ProtocolWebDAV {
		return s.davList(ctx, call, l, id, c, n)
	}
	return s.restList(ctx, call, l, id, c, n)
}

func (s *Source) restList(ctx context.Context, call Call, l *Level, id string, c cursor, n int) (*Page, error) {
	lo := l.List
	args := cloneArgs(lo.Arguments)
	args[lo.ParentParameter] = id
	p := lo.Paging
	if p.LimitParameter != "" {
		args[p.LimitParameter] = n
	}
	switch p.Style {
	case PagingOffset:
		args[p.OffsetParameter] = c.Offset
	case PagingCursor:
		if c.Up != "" {
			args[p.CursorParameter] = c.Up
		}
	case PagingLink:
		if c.Up != "" {
			q, err := url.ParseQuery(c.Up)
			if err != nil {
				return nil, errInvalidParams("the cursor is not one this server gave")
			}
			linkArgs(args, q, s.listOps[lo], lo.ParentParameter)
		}
	}
	resp, err := call(ctx, s.listOps[lo], args)
	if err != nil {
		return nil, s.upstreamError(err, s.URI(l, id))
	}
	var body any
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return nil, errUpstreamShape("the listing is not JSON")
	}
	items, ok := lookup(body, lo.Items).([]any)
	if !ok {
		return nil, errUpstreamShape("the listing has no array at " + strconv.Quote(lo.Items))
	}
	page := &Page{}
	if p.Style == PagingNone {
		// The upstream gives the whole level: paged here.
		start := min(c.Offset, len(items))
		end := min(start+n, len(items))
		if end < len(items) {
			next := c
			next.Offset = end
			page.Next = next.encode()
		}
		items = items[start:end]
	} else if len(items) > n && p.Style == PagingOffset {
		items = items[:n]
	}
	for _, it := range items {
		obj, ok := it.(map[string]any)
		if !ok {
			continue
		}
		if e, ok := s.entryOf(obj, l); ok {
			page.Entries = append(page.Entries, e)
		}
	}
	switch p.Style {
	case PagingOffset:
		got := len(items)
		total, hasTotal := number(lookup(body, p.Total))
		more := got > 0 && (hasTotal && int64(c.Offset+got) < total || !hasTotal && got >= n)
		if more {
			next := c
			next.Offset = c.Offset + got
			page.Next = next.encode()
		}
	case PagingCursor:
		if v, ok := lookup(body, p.NextCursor).(string); ok && v != "" && len(items) > 0 {
			next := c
			next.Up = v
			page.Next = next.encode()
		}
	case PagingLink:
		if q := nextLinkQuery(resp.Header); q != "" && len(items) > 0 {
			next := c
			next.Up = q
			page.Next = next.encode()
		}
	}
	return page, nil
}

// linkArgs puts the query of a next link into args: the values of the
// operation's query parameters only. A next link often carries others
// (tracking, the upstream's own defaults) the operation does not declare,
// which would refuse the call; and the parent stays the listing's own
// whatever the query (the cursor comes back from the client, which may
// have forged it).
func linkArgs(args map[string]any, q url.Values, op *registry.Operation, parent string) {
	for _, p := range op.Params {
		arg := p.Arg
		if arg == "" {
			arg = p.Name
		}
		v, ok := q[p.Name]
		if p.In != "query" || !ok || len(v) == 0 || arg == parent {
			continue
		}
		args[arg] = queryValue(v[0], p.Schema)
	}
}

// queryValue is a query string's value as the argument the schema takes:
// a number or a boolean when it says so (and the text is one), else the
// text.
func queryValue(v string, schema *jsonschema.Schema) any {
	if schema == nil {
		return v
	}
	types := schema.Types
	if schema.Type != "" {
		types = []string{schema.Type}
	}
	for _, t := range types {
		switch t {
		case "integer":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		case "number":
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		case "boolean":
			if b, err := strconv.ParseBool(v); err == nil {
				return b
			}
		}
	}
	return v
}

// nextLinkQuery returns the query of a Link header's rel="next" URL.
func nextLinkQuery(h http.Header) string {
	for _, v := range h.Values("Link") {
		for _, part := range strings.Split(v, ",") {
			target, params, _ := strings.Cut(part, ";")
			if !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) && !strings.Contains(params, "rel=next") {
				continue
			}
			target = strings.Trim(strings.TrimSpace(target), "<>")
			if u, err := url.Parse(target); err == nil {
				return u.RawQuery
			}
		}
	}
	return ""
}

// entryOf reads an upstream object as an entry. A listed object belongs
// to the level its type field matches, or, without one, to the first
// level below the container listed (under) that is a document level.
func (s *Source) entryOf(obj map[string]any, under *Level) (Entry, bool) {
	l := under
	if under.Kind == KindFolder {
		l = s.childLevel(obj, under)
	}
	if l == nil {
		return Entry{}, false
	}
	f := l.Fields
	id := scalarString(lookup(obj, f.ID))
	if id == "" {
		return Entry{}, false
	}
	e := Entry{URI: s.URI(l, id), Name: scalarString(lookup(obj, f.Name)), Kind: l.Kind, Level: l.Name}
	if f.MimeType != "" {
		e.MimeType = scalarString(lookup(obj, f.MimeType))
	}
	if e.MimeType == "" && l.Kind == KindFile {
		e.MimeType = guessMime(e.Name)
	}
	if n, ok := number(lookup(obj, f.Size)); ok {
		e.Size = n
	}
	e.Revision = s.revisionOf(obj, f)
	return e, true
}

// childLevel is the level of a listed object of container level under.
func (s *Source) childLevel(obj map[string]any, under *Level) *Level {
	if t := scalarString(lookup(obj, under.Fields.Type)); t != "" {
		return s.byMatch[t] // nil: an entry of a kind the source does not serve
	}
	return s.fileLevel()
}

// revisionOf is the primary revision field, else the fallback.
func (s *Source) revisionOf(obj map[string]any, f Fields) string {
	for _, src := range []string{s.Revision.Primary, s.Revision.Fallback} {
		path := f.Revision
		if src == "modified" {
			path = f.Modified
		}
		if v := scalarString(lookup(obj, path)); v != "" {
			if src == "modified" {
				return "modified:" + v
			}
			return v
		}
	}
	return ""
}

// Read reads the resource uri: its entry and, unless metadataOnly or a
// folder, its content (text up to the source's bound, a download URL, or
// a WebDAV binary as a blob up to the bound).
func (s *Source) Read(ctx context.Context, call Call, uri string, metadataOnly bool) (*Document, error) {
	l, id, ok := s.ParseURI(uri)
	if !ok {
		return nil, errNotFound(uri)
	}
	if s.Protocol == ProtocolWebDAV {
		return s.davRead(ctx, call, uri, l, id, metadataOnly)
	}
	obj, err := s.get(ctx, call, l, id)
	if err != nil {
		return nil, err
	}
	e, ok := s.entryOf(obj, l)
	if !ok {
		return nil, errUpstreamShape("the answer names no id")
	}
	e.URI = uri
	doc := &Document{Entry: e}
	if metadataOnly || l.Kind == KindFolder {
		return doc, nil
	}
	if f := l.Fields.DownloadURL; f != "" {
		if u := scalarString(lookup(obj, f)); u != "" {
			doc.DownloadURL = u
			return doc, nil
		}
	}
	d := l.Download
	if d == nil {
		return doc, nil
	}
	args := cloneArgs(d.Arguments)
	args[d.IDParameter] = id
	resp, err := call(ctx, s.ops[d], args)
	if d.URL == "header:Location" && resp != nil && resp.Status >= 300 && resp.Status < 400 {
		if loc := resp.Header.Get("Location"); loc != "" {
			doc.DownloadURL = loc
			return doc, nil
		}
	}
	if err != nil {
		return nil, s.upstreamError(err, uri)
	}
	if d.URL != "" && d.URL != "header:Location" {
		var body any
		if json.Unmarshal(resp.Body, &body) == nil {
			if u := scalarString(lookup(body, d.URL)); u != "" {
				doc.DownloadURL = u
				return doc, nil
			}
		}
		return nil, errUpstreamShape("the download answer has no URL at " + strconv.Quote(d.URL))
	}
	return s.content(doc, resp)
}

// content puts an answer's body in doc: text when it is text-like and
// within the bound, else a blob within the bound.
func (s *Source) content(doc *Document, resp *registry.Response) (*Document, error) {
	mt := doc.MimeType
	if ct, _, _ := strings.Cut(resp.ContentType, ";"); strings.TrimSpace(ct) != "" && (mt == "" || mt == "application/octet-stream") {
		mt = strings.TrimSpace(ct)
		doc.MimeType = mt
	}
	if len(resp.Body) > s.TextMaxBytes {
		return nil, tooLarge(s.TextMaxBytes)
	}
	if TextLike(mt) && utf8.Valid(resp.Body) {
		doc.Text = string(resp.Body)
	} else {
		doc.Blob = bytes.Clone(resp.Body)
	}
	if doc.Size == 0 {
		doc.Size = int64(len(resp.Body))
	}
	return doc, nil
}

// get reads one entry's metadata object.
func (s *Source) get(ctx context.Context, call Call, l *Level, id string) (map[string]any, error) {
	args := cloneArgs(l.Get.Arguments)
	args[l.Get.IDParameter] = id
	resp, err := call(ctx, s.ops[l.Get], args)
	if err != nil {
		return nil, s.upstreamError(err, s.URI(l, id))
	}
	var obj map[string]any
	if err := json.Unmarshal(resp.Body, &obj); err != nil || obj == nil {
		return nil, errUpstreamShape("the answer is not a JSON object")
	}
	if t := scalarString(lookup(obj, l.Fields.Type)); t != "" && s.byMatch[t] != l {
		// A file id asked for as a folder (or the reverse).
		return nil, errNotFound(s.URI(l, id))
	}
	return obj, nil
}

// CheckAccess answers, per URI, whether the reader may read it: allowed,
// denied or not_found, failing closed (any other failure is a denial with
// its code, never allowed). More URIs than the source's cap refuse the
// whole request before any upstream call. A failure of the reader's
// credential rather than of a document (the upstream's 401,
// reconnect_required; a grant not given yet, consent_required: any error
// of kind ErrUnauthorized) fails the whole request with that error, never
// a denial: the documents may well be the reader's. The upstream's 403 is
// denied and its 404 not_found, never a reconnection.
func (s *Source) CheckAccess(ctx context.Context, call Call, uris []string) ([]AccessResult, error) {
	if len(uris) > s.MaxURIs {
		return nil, switchboard.E(switchboard.ErrInvalid, "invalid_arguments",
			"checkAccess takes at most %d URIs; %d were sent", s.MaxURIs, len(uris))
	}
	out := make([]AccessResult, 0, len(uris))
	done := make(map[string]AccessResult, len(uris)) // a URI sent twice is asked for once
	for _, uri := range uris {
		if r, ok := done[uri]; ok {
			out = append(out, r)
			continue
		}
		r := AccessResult{URI: uri, Access: "allowed"}
		_, err := s.Read(ctx, call, uri, true)
		switch code := switchboard.CodeOf(err); {
		case err == nil:
		case errors.Is(err, switchboard.ErrUnauthorized):
			return nil, err
		case code == "resource_not_found" || code == "not_found":
			r.Access = "not_found"
		case code == "forbidden":
			r.Access = "denied"
		default:
			r.Access, r.Code = "denied", code
		}
		done[uri] = r
		out = append(out, r)
	}
	return out, nil
}

// upstreamError maps an upstream failure: 404 is the resource's
// not-found, the rest (401 reconnect_required, 403 forbidden, ...) as the
// dispatcher typed them.
func (s *Source) upstreamError(err error, uri string) error {
	var ue *registry.UpstreamError
	if errors.As(err, &ue) && ue.Status == http.StatusNotFound {
		return errNotFound(uri)
	}
	return err
}

func errUpstreamShape(msg string) error {
	return switchboard.E(switchboard.ErrUnavailable, "upstream_unavailable", "the upstream answer is not what the knowledge section says: %s", msg)
}

// TextLike reports whether a media type is text a reader can take inline.
func TextLike(mt string) bool {
	mt = strings.ToLower(strings.TrimSpace(mt))
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/xml" || strings.HasSuffix(mt, "+xml") || mt == "application/x-yaml" || mt == "application/yaml" ||
		mt == "application/javascript"
}

// guessMime is the media type a name's extension suggests, for upstreams
// that give none.
func guessMime(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return ""
	}
	switch strings.ToLower(name[i+1:]) {
	case "txt", "text", "log":
		return "text/plain"
	case "md", "markdown":
		return "text/markdown"
	case "html", "htm":
		return "text/html"
	case "csv":
		return "text/csv"
	case "json":
		return "application/json"
	case "xml":
		return "application/xml"
	case "pdf":
		return "application/pdf"
	case "png":
		return "image/png"
	case "jpg", "jpeg":
		return "image/jpeg"
	}
	return "application/octet-stream"
}

// lookup follows a dotted path through JSON objects; "" is v itself.
func lookup(v any, path string) any {
	if path == "" {
		return v
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

func number(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		return int64(x), true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func cloneArgs(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+3)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func tooLarge(n int) error {
	return switchboard.E(switchboard.ErrInvalid, "response_too_large", "the document is larger than the %d bytes a read returns", n)
}
