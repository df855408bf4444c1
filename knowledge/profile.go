package knowledge

import (
	"encoding/json"
	"net/url"
	"strings"
)

// ToolName is the tool whose action CheckAccessAction answers the access
// check. It is marked for applications, not for the model.
const (
	ToolName          = "knowledge"
	CheckAccessAction = "checkAccess"
)

// Where requests carry the contract's parameters: members of params._meta.
const (
	// MetaParent names the parent container's URI in resources/list.
	MetaParent = "parentUri"
	// MetaPageSize asks resources/list for a page size (clamped).
	MetaPageSize = "pageSize"
	// MetaMetadataOnly asks resources/read for the entry without content.
	MetaMetadataOnly = "metadataOnly"
	// MetaTargetUser names the member a trusted knowledge-sync caller
	// reads for.
	MetaTargetUser = "targetUserId"
)

// profileHost is the host of the profile's URI: <scheme>://profile/knowledge.
const profileHost = "profile"

// ProfileURI is the URI of the source's profile.
func (s *Source) ProfileURI() string { return s.Scheme + "://" + profileHost + "/knowledge" }

// Profile is the profile document (JSON), readable without credentials.
func (s *Source) Profile() []byte { return s.profile }

// Template is a level's URI template.
type Template struct {
	Level       string `json:"level"`
	Kind        string `json:"kind"`
	URITemplate string `json:"uri_template"`
}

// Templates are the URI templates of the levels, top first.
func (s *Source) Templates() []Template { return s.templates }

func (s *Source) buildTemplates() []Template {
	var out []Template
	for _, l := range s.Levels {
		v := "{id}"
		if s.Protocol == ProtocolWebDAV {
			v = "{+path}"
		}
		out = append(out, Template{Level: l.Name, Kind: l.Kind, URITemplate: s.Scheme + "://" + l.Name + "/" + v})
	}
	return out
}

func (s *Source) buildProfile() []byte {
	hierarchy := s.templates
	binary := "downloadUrl"
	if s.Protocol == ProtocolWebDAV {
		binary = "blob"
	}
	modes := s.modes
	if modes == nil {
		modes = []string{}
	}
	doc := map[string]any{
		"knowledge_compatible": true,
		"provider":             s.Provider,
		"tools":                []string{ToolName},
		"hierarchy":            hierarchy,
		"canonical_uri":        s.Scheme + "://{level}/{id}",
		"root_uri":             s.RootURI(),
		"list": map[string]any{
			"parent_parameter":    "_meta." + MetaParent,
			"page_size_parameter": "_meta." + MetaPageSize,
			"default_page_size":   s.PageSize.Default,
			"maximum_page_size":   s.PageSize.Maximum,
			"cursor":              "opaque",
		},
		"read": map[string]any{
			"text_max_bytes":          s.TextMaxBytes,
			"binary":                  binary,
			"metadata_only_parameter": "_meta." + MetaMetadataOnly,
			"revision":                "revision",
		},
		"revision": map[string]any{"primary": s.Revision.Primary, "fallback": s.Revision.Fallback},
		"access":   map[string]any{"tool": ToolName, "action": CheckAccessAction, "maximum_uris": s.MaxURIs},
		"authentication": map[string]any{
			"modes":                 modes,
			"resource_access":       s.ResourceAccess,
			"target_user_parameter": "_meta." + MetaTargetUser,
		},
	}
	b, _ := json.Marshal(doc)
	return b
}

// RootURI is the URI of the top container.
func (s *Source) RootURI() string { return s.URI(s.folderLevel(), s.Root) }

// URI is the canonical URI of the entry id at level l.
func (s *Source) URI(l *Level, id string) string {
	return s.Scheme + "://" + l.Name + "/" + escapeID(s.Protocol, id)
}

// escapeID escapes an id for a URI path: a WebDAV path segment by
// segment (its slashes kept), any other id whole.
func escapeID(protocol, id string) string {
	if protocol != ProtocolWebDAV {
		return url.PathEscape(id)
	}
	segs := strings.Split(id, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// ParseURI returns the level and id of a URI of the source; ok is false
// for a URI that is not one (another scheme, an unknown level, a bad
// escape). The profile is not an entry.
func (s *Source) ParseURI(uri string) (l *Level, id string, ok bool) {
	rest, found := strings.CutPrefix(uri, s.Scheme+"://")
	if !found || len(uri) > 4096 {
		return nil, "", false
	}
	name, raw, found := strings.Cut(rest, "/")
	if !found {
		return nil, "", false
	}
	l = s.levels[name]
	if l == nil || strings.ContainsAny(raw, "?#") {
		return nil, "", false
	}
	id, err := url.PathUnescape(raw)
	if err != nil || strings.ContainsRune(id, 0) {
		return nil, "", false
	}
	if s.Protocol == ProtocolWebDAV {
		id = strings.Trim(id, "/")
		for _, seg := range strings.Split(id, "/") {
			if seg == "." || seg == ".." {
				return nil, "", false
			}
		}
	} else if id == "" {
		return nil, "", false
	}
	return l, id, true
}
