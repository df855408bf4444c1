// Package knowledge serves a connector's document hierarchy (drives,
// folders, files) as standard MCP Resources, so that a knowledge-base sync
// service that knows nothing but the Resources contract can walk, read and
// re-read it: a public profile resource, one URI template per level,
// paged listings of one level, reads that inline text or hand out a
// short-lived download URL, revisions, and an access check.
//
// Nothing here is written per connector: the connector's mapping file
// declares a "knowledge" section (Section) naming, per level, the
// operations that list and get it, the parent parameter, the fields that
// hold id, name, media type, size, revision and download URL, and the
// paging style. Upstream calls go through a Call the MCP endpoint gives,
// which carries the reader's credentials, the egress guard and the audit.
package knowledge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

// Protocols a Section's upstream speaks.
const (
	// ProtocolREST: levels are listed and read through the operations of
	// the connector's registry.
	ProtocolREST = "rest"
	// ProtocolWebDAV: a folder is listed with PROPFIND (Depth: 1) on its
	// path and a file read with GET on its path (RFC 4918); ids are paths
	// relative to the instance's base URL.
	ProtocolWebDAV = "webdav"
)

// Resource access: whose credential reads the documents.
const (
	// PerReader: each reader's own grant (a member's own OAuth grant or
	// user-scope fields); what one reads depends on who they are.
	PerReader = "per-reader"
	// PerimeterOnly: the instance's one credential; every reader allowed
	// in the tenant sees the same tree.
	PerimeterOnly = "perimeter-only"
)

// Kinds of entries (_meta.kind).
const (
	KindFolder = "folder"
	KindFile   = "file"
)

// Paging styles of a level's list operation.
const (
	PagingNone   = "none"
	PagingOffset = "offset"
	PagingCursor = "cursor"
	PagingLink   = "link"
)

// Page size bounds when the section sets none, and the hard ceiling.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
	// DefaultTextBytes bounds the text a read inlines when the section
	// sets no bound.
	DefaultTextBytes = 1 << 20
	// DefaultMaxURIs is checkAccess's cap when the section sets none.
	DefaultMaxURIs = 100
)

// Section is the "knowledge" section of a mapping file.
type Section struct {
	// Scheme is the URI scheme of the resources (default: the connector
	// id, made URI-safe).
	Scheme string `json:"scheme,omitempty"`
	// Provider names the document store (shown in the profile).
	Provider string `json:"provider"`
	// Protocol is ProtocolREST (default) or ProtocolWebDAV.
	Protocol string `json:"protocol,omitempty"`
	// ResourceAccess is PerReader or PerimeterOnly.
	ResourceAccess string `json:"resource_access"`
	// Root is the id of the top container, listed when resources/list
	// names no parent ("" for WebDAV: the base URL's folder).
	Root string `json:"root,omitempty"`
	// PageSize bounds the listings' page size.
	PageSize PageSize `json:"page_size,omitempty"`
	// TextMaxBytes bounds the text a read inlines (default 1 MiB).
	TextMaxBytes int `json:"text_max_bytes,omitempty"`
	// Revision names the revision's sources: Primary (default "etag")
	// then Fallback (default "modified").
	Revision Revision `json:"revision,omitempty"`
	// MaxURIs caps checkAccess's URIs (default 100).
	MaxURIs int `json:"maximum_uris,omitempty"`
	// Fields are the default fields of every level's entries.
	Fields Fields `json:"fields,omitempty"`
	// Levels are the hierarchy, top first: at least one container
	// (kind folder) and one document level (kind file).
	Levels []Level `json:"levels"`
}

// PageSize is a section's page size bounds.
type PageSize struct {
	Default int `json:"default,omitempty"`
	Maximum int `json:"maximum,omitempty"`
}

// Revision says where an entry's revision comes from: the names of
// fields (Fields.Revision, Fields.Modified); "etag" and "modified" are
// the defaults.
type Revision struct {
	Primary  string `json:"primary,omitempty"`
	Fallback string `json:"fallback,omitempty"`
}

// Fields name where an entry's attributes are in the upstream's JSON
// objects: dotted paths ("shared_link.download_url").
type Fields struct {
	ID       string `json:"id,omitempty"`
	Name     string `json:"name,omitempty"`
	MimeType string `json:"mime_type,omitempty"`
	Size     string `json:"size,omitempty"`
	Revision string `json:"revision,omitempty"`
	Modified string `json:"modified,omitempty"`
	// Type holds the value that tells which level an entry of a listing
	// belongs to (matched against Level.Match).
	Type string `json:"type,omitempty"`
	// DownloadURL holds a download URL in the get answer.
	DownloadURL string `json:"download_url,omitempty"`
}

// Level is one level of the hierarchy.
type Level struct {
	// Name names the level in URIs: <scheme>://<name>/<id>.
	Name string `json:"name"`
	// Kind is KindFolder (a container, listable) or KindFile (a document).
	Kind string `json:"kind"`
	// Match is the value of Fields.Type that puts a listed entry at this
	// level (default: Name).
	Match string `json:"match,omitempty"`
	// List lists a container's children (folders).
	List *ListOp `json:"list,omitempty"`
	// Get reads one entry's metadata.
	Get *Op `json:"get,omitempty"`
	// Download reads a document's content, or (URL "header:Location")
	// answers a redirect to a short-lived download URL.
	Download *Op `json:"download,omitempty"`
	// Fields override the section's fields for this level.
	Fields Fields `json:"fields,omitempty"`
}

// Op names an operation (operationId or tool-safe name) and the argument
// the entry's id goes into.
type Op struct {
	Operation   string `json:"operation"`
	IDParameter string `json:"id_parameter,omitempty"`
	// Arguments are sent with every call (such as a fields selector).
	Arguments map[string]any `json:"arguments,omitempty"`
	// URL is where a download URL is: "header:Location" (a redirect),
	// or a field of the answer. Empty: the answer is the content.
	URL string `json:"url,omitempty"`
}

// ListOp is a container's list operation.
type ListOp struct {
	Operation string `json:"operation"`
	// ParentParameter is the argument the container's id goes into.
	ParentParameter string `json:"parent_parameter"`
	// Items is the field of the answer holding the entries ("" when the
	// answer is the array).
	Items     string         `json:"items,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Paging    Paging         `json:"paging,omitempty"`
}

// Paging is how a list operation pages.
type Paging struct {
	// Style is PagingOffset, PagingCursor, PagingLink or PagingNone.
	Style string `json:"style"`
	// LimitParameter takes the page size.
	LimitParameter string `json:"limit_parameter,omitempty"`
	// OffsetParameter takes the offset (PagingOffset).
	OffsetParameter string `json:"offset_parameter,omitempty"`
	// Total is the field of the answer holding the total count
	// (PagingOffset; without it a short page ends the listing).
	Total string `json:"total,omitempty"`
	// CursorParameter takes the cursor and NextCursor is the field of the
	// answer holding the next one (PagingCursor).
	CursorParameter string `json:"cursor_parameter,omitempty"`
	NextCursor      string `json:"next_cursor,omitempty"`
}

// Source is a connector's checked knowledge section, bound to its
// registry.
type Source struct {
	Section
	ConnectorID string
	spec        *registry.Spec
	levels      map[string]*Level
	byMatch     map[string]*Level
	ops         map[*Op]*registry.Operation
	listOps     map[*ListOp]*registry.Operation
	modes       []string
	profile     []byte
	templates   []Template
}

var (
	sourcesMu sync.Mutex
	sources   = map[*registry.Connector]*sourceEntry{}
)

type sourceEntry struct {
	src *Source
	err error
}

// Of returns the knowledge source of conn: nil (no error) when its mapping
// has no knowledge section, an error when the section is invalid. The
// answer is computed once per connector.
func Of(conn *registry.Connector) (*Source, error) {
	if conn == nil || conn.Spec == nil || conn.Manifest.Mapping == "" {
		return nil, nil
	}
	sourcesMu.Lock()
	defer sourcesMu.Unlock()
	if e, ok := sources[conn]; ok {
		return e.src, e.err
	}
	src, err := parse(conn)
	if len(sources) > 1024 {
		clear(sources) // catalogs are replaced rarely; stay bounded
	}
	sources[conn] = &sourceEntry{src, err}
	return src, err
}

// SectionOf returns the raw knowledge section of a mapping file, or nil.
func SectionOf(mapping []byte) (json.RawMessage, error) {
	var m struct {
		Knowledge json.RawMessage `json:"knowledge"`
	}
	if err := json.Unmarshal(mapping, &m); err != nil {
		return nil, err
	}
	if len(m.Knowledge) == 0 || string(m.Knowledge) == "null" {
		return nil, nil
	}
	return m.Knowledge, nil
}

func invalid(format string, args ...any) error {
	return switchboard.E(switchboard.ErrInvalid, "invalid_mapping", "the knowledge section is not valid: "+format, args...)
}

var schemeRE = regexp.MustCompile(`^[a-z][a-z0-9+.-]{0,31}$`)
var levelRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

func parse(conn *registry.Connector) (*Source, error) {
	raw, err := SectionOf(conn.Files[conn.Manifest.Mapping])
	if err != nil || raw == nil {
		return nil, err
	}
	var sec Section
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sec); err != nil {
		return nil, invalid("%s", err.Error())
	}
	return Bind(conn.Manifest.ID, conn.Manifest.Auth.Modes, sec, conn.Spec)
}

// Bind checks sec against spec and returns the source of a connector
// whose instances use the auth modes given.
func Bind(connectorID string, modes []string, sec Section, spec *registry.Spec) (*Source, error) {
	s := &Source{Section: sec, ConnectorID: connectorID, spec: spec, modes: modes, levels: map[string]*Level{}, byMatch: map[string]*Level{},
		ops: map[*Op]*registry.Operation{}, listOps: map[*ListOp]*registry.Operation{}}
	if s.Scheme == "" {
		s.Scheme = strings.ToLower(strings.NewReplacer("_", "-").Replace(connectorID))
	}
	if !schemeRE.MatchString(s.Scheme) {
		return nil, invalid("scheme %q is not a URI scheme", s.Scheme)
	}
	switch s.Protocol {
	case "":
		s.Protocol = ProtocolREST
	case ProtocolREST, ProtocolWebDAV:
	default:
		return nil, invalid("protocol must be %q or %q", ProtocolREST, ProtocolWebDAV)
	}
	if s.ResourceAccess != PerReader && s.ResourceAccess != PerimeterOnly {
		return nil, invalid("resource_access must be %q or %q", PerReader, PerimeterOnly)
	}
	if s.PageSize.Maximum <= 0 {
		s.PageSize.Maximum = 200
	}
	s.PageSize.Maximum = min(s.PageSize.Maximum, MaxPageSize)
	if s.PageSize.Default <= 0 {
		s.PageSize.Default = min(DefaultPageSize, s.PageSize.Maximum)
	}
	if s.PageSize.Default > s.PageSize.Maximum {
		return nil, invalid("page_size.default is above page_size.maximum")
	}
	if s.TextMaxBytes <= 0 {
		s.TextMaxBytes = DefaultTextBytes
	}
	if s.MaxURIs <= 0 {
		s.MaxURIs = DefaultMaxURIs
	}
	if s.Revision.Primary == "" {
		s.Revision.Primary = "etag"
	}
	if s.Revision.Fallback == "" {
		s.Revision.Fallback = "modified"
	}
	var folders, files int
	for i := range s.Levels {
		l := &s.Levels[i]
		if !levelRE.MatchString(l.Name) || s.levels[l.Name] != nil || l.Name == profileHost {
			return nil, invalid("level name %q is not a unique lower-case word", l.Name)
		}
		s.levels[l.Name] = l
		if l.Match == "" {
			l.Match = l.Name
		}
		s.byMatch[l.Match] = l
		l.Fields = l.Fields.or(s.Fields)
		switch l.Kind {
		case KindFolder:
			folders++
			if s.Protocol == ProtocolREST && l.List == nil {
				return nil, invalid("folder level %q has no list operation", l.Name)
			}
		case KindFile:
			files++
		default:
			return nil, invalid("level %q: kind must be %q or %q", l.Name, KindFolder, KindFile)
		}
		if s.Protocol != ProtocolREST {
			continue
		}
		if l.List != nil {
			op, err := s.operation(l.List.Operation)
			if err != nil {
				return nil, err
			}
			if l.List.ParentParameter == "" {
				return nil, invalid("level %q: list has no parent_parameter", l.Name)
			}
			switch l.List.Paging.Style {
			case "":
				l.List.Paging.Style = PagingNone
			case PagingNone, PagingLink:
			case PagingOffset:
				if l.List.Paging.OffsetParameter == "" {
					return nil, invalid("level %q: offset paging needs offset_parameter", l.Name)
				}
			case PagingCursor:
				if l.List.Paging.CursorParameter == "" || l.List.Paging.NextCursor == "" {
					return nil, invalid("level %q: cursor paging needs cursor_parameter and next_cursor", l.Name)
				}
			default:
				return nil, invalid("level %q: paging style %q is not offset, cursor, link or none", l.Name, l.List.Paging.Style)
			}
			s.listOps[l.List] = op
		}
		for _, o := range []*Op{l.Get, l.Download} {
			if o == nil {
				continue
			}
			op, err := s.operation(o.Operation)
			if err != nil {
				return nil, err
			}
			if o.IDParameter == "" {
				return nil, invalid("level %q: operation %q has no id_parameter", l.Name, o.Operation)
			}
			s.ops[o] = op
		}
		if l.Get == nil {
			return nil, invalid("level %q has no get operation", l.Name)
		}
	}
	if folders == 0 || files == 0 {
		return nil, invalid("the levels need at least one folder and one file level")
	}
	if s.Protocol == ProtocolWebDAV && (len(s.Levels) != 2 || s.Levels[0].Kind != KindFolder) {
		return nil, invalid("a webdav source has two levels: a folder level, then a file level")
	}
	if _, taken := s.entity(ToolName); taken {
		return nil, invalid("the registry has an entity named %q, the access check's tool", ToolName)
	}
	s.templates = s.buildTemplates()
	s.profile = s.buildProfile()
	return s, nil
}

func (s *Source) operation(name string) (*registry.Operation, error) {
	if s.spec == nil {
		return nil, invalid("no registry")
	}
	op, ok := s.spec.Operation(name)
	if !ok {
		return nil, invalid("operation %q is not an action of the registry", name)
	}
	return op, nil
}

// or fills the empty fields of f from d, and the defaults.
func (f Fields) or(d Fields) Fields {
	pick := func(a, b, def string) string {
		if a != "" {
			return a
		}
		if b != "" {
			return b
		}
		return def
	}
	return Fields{
		ID:          pick(f.ID, d.ID, "id"),
		Name:        pick(f.Name, d.Name, "name"),
		MimeType:    pick(f.MimeType, d.MimeType, ""),
		Size:        pick(f.Size, d.Size, "size"),
		Revision:    pick(f.Revision, d.Revision, "etag"),
		Modified:    pick(f.Modified, d.Modified, "modified_at"),
		Type:        pick(f.Type, d.Type, "type"),
		DownloadURL: pick(f.DownloadURL, d.DownloadURL, ""),
	}
}

// folderLevel is the first container level; fileLevel the first document
// level.
func (s *Source) folderLevel() *Level { return s.firstOf(KindFolder) }
func (s *Source) fileLevel() *Level   { return s.firstOf(KindFile) }

func (s *Source) firstOf(kind string) *Level {
	for i := range s.Levels {
		if s.Levels[i].Kind == kind {
			return &s.Levels[i]
		}
	}
	return nil
}

func (s *Source) String() string {
	return fmt.Sprintf("knowledge source %s (%s)", s.ConnectorID, s.Scheme)
}

func (s *Source) entity(name string) (*registry.Entity, bool) {
	if s.spec == nil {
		return nil, false
	}
	return s.spec.Entity(name)
}
