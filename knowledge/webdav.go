package knowledge

import (
	"context"
	"encoding/xml"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboardhq/switchboard/registry"
)

// WebDAV (RFC 4918): a folder's children are the responses of a PROPFIND
// with Depth 1 on its path, its own entry that of Depth 0; a file's
// content is a GET on its path. Ids are paths relative to the instance's
// base URL, without leading or trailing slash ("" is the base folder).

// multistatus is the part of a PROPFIND answer read here.
type multistatus struct {
	Responses []davResponse `xml:"response"`
}

type davResponse struct {
	Href     string       `xml:"href"`
	Propstat []davPropset `xml:"propstat"`
}

type davPropset struct {
	Status string  `xml:"status"`
	Prop   davProp `xml:"prop"`
}

type davProp struct {
	DisplayName  string `xml:"displayname"`
	Length       string `xml:"getcontentlength"`
	ContentType  string `xml:"getcontenttype"`
	ETag         string `xml:"getetag"`
	LastModified string `xml:"getlastmodified"`
	ResourceType struct {
		Collection *struct{} `xml:"collection"`
	} `xml:"resourcetype"`
}

// davOp is the operation of one WebDAV request on the path id.
func davOp(method, id string, folder bool) *registry.Operation {
	p := "/" + escapeID(ProtocolWebDAV, id)
	if folder && id != "" {
		p += "/"
	}
	op := &registry.Operation{ID: "webdav_" + strings.ToLower(method), Name: "webdav_" + strings.ToLower(method),
		Method: method, Path: p, Accept: "*/*"}
	if method == "PROPFIND" {
		op.Accept = "application/xml"
		op.Params = []registry.Param{{Name: "Depth", In: "header"}}
	}
	return op
}

// propfind returns the parsed multistatus of a PROPFIND on id.
func (s *Source) propfind(ctx context.Context, call Call, id string, folder bool, depth string) (*multistatus, error) {
	resp, err := call(ctx, davOp("PROPFIND", id, folder), map[string]any{"Depth": depth})
	if err != nil {
		l := s.fileLevel()
		if folder {
			l = s.folderLevel()
		}
		return nil, s.upstreamError(err, s.URI(l, id))
	}
	var ms multistatus
	if err := xml.Unmarshal(resp.Body, &ms); err != nil {
		return nil, errUpstreamShape("the PROPFIND answer is not a multistatus document")
	}
	return &ms, nil
}

// davEntry is the entry of one PROPFIND response for the path id.
func (s *Source) davEntry(r davResponse, id string) Entry {
	var p davProp
	for _, ps := range r.Propstat {
		if strings.Contains(ps.Status, " 200 ") || ps.Status == "" {
			p = ps.Prop
			break
		}
	}
	l := s.fileLevel()
	if p.ResourceType.Collection != nil {
		l = s.folderLevel()
	}
	name := p.DisplayName
	if name == "" {
		name = path.Base("/" + id)
	}
	e := Entry{URI: s.URI(l, id), Name: name, Kind: l.Kind, Level: l.Name, MimeType: p.ContentType}
	if l.Kind == KindFile && e.MimeType == "" {
		e.MimeType = guessMime(name)
	}
	if l.Kind == KindFolder {
		e.MimeType = ""
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(p.Length), 10, 64); err == nil {
		e.Size = n
	}
	switch {
	case s.Revision.Primary == "etag" && p.ETag != "":
		e.Revision = p.ETag
	case p.LastModified != "":
		e.Revision = "modified:" + p.LastModified
	case p.ETag != "":
		e.Revision = p.ETag
	}
	return e
}

// hrefID is the id of a child response of the folder parent: the last
// segment of its decoded path, joined to parent.
func hrefID(parent, href string) (string, bool) {
	base := path.Base(href)
	if base == "" || base == "." || base == "/" || base == ".." {
		return "", false
	}
	if parent == "" {
		return base, true
	}
	return parent + "/" + base, true
}

func (s *Source) davList(ctx context.Context, call Call, l *Level, id string, c cursor, n int) (*Page, error) {
	ms, err := s.propfind(ctx, call, id, true, "1")
	if err != nil {
		return nil, err
	}
	// The folder's own response is the one of the shortest path: its
	// children are one segment deeper.
	paths := make([]string, len(ms.Responses))
	shortest := -1
	for i, r := range ms.Responses {
		paths[i] = hrefPath(r.Href)
		if d := strings.Count(paths[i], "/"); shortest < 0 || d < shortest {
			shortest = d
		}
	}
	var entries []Entry
	for i, r := range ms.Responses {
		if strings.Count(paths[i], "/") == shortest {
			continue
		}
		cid, ok := hrefID(id, paths[i])
		if !ok {
			continue
		}
		entries = append(entries, s.davEntry(r, cid))
	}
	// The order of a multistatus answer is the server's: sorted here so
	// that offsets stay meaningful from one page to the next.
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.URI, b.URI) })
	start := min(c.Offset, len(entries))
	end := min(start+n, len(entries))
	page := &Page{Entries: entries[start:end]}
	if end < len(entries) {
		next := c
		next.Offset = end
		page.Next = next.encode()
	}
	return page, nil
}

// hrefPath is the decoded path of an href (an absolute URL or path),
// without trailing slash.
func hrefPath(href string) string {
	if u, err := url.Parse(href); err == nil {
		href = u.Path
	}
	return strings.TrimRight(href, "/")
}

func (s *Source) davRead(ctx context.Context, call Call, uri string, l *Level, id string, metadataOnly bool) (*Document, error) {
	ms, err := s.propfind(ctx, call, id, l.Kind == KindFolder, "0")
	if err != nil {
		return nil, err
	}
	if len(ms.Responses) == 0 {
		return nil, errNotFound(uri)
	}
	e := s.davEntry(ms.Responses[0], id)
	if e.Level != l.Name {
		return nil, errNotFound(uri)
	}
	e.URI = uri
	doc := &Document{Entry: e}
	if metadataOnly || l.Kind == KindFolder {
		return doc, nil
	}
	if e.Size > int64(s.TextMaxBytes) {
		return nil, tooLarge(s.TextMaxBytes)
	}
	resp, err := call(ctx, davOp("GET", id, false), nil)
	if err != nil {
		return nil, s.upstreamError(err, uri)
	}
	if etag := resp.Header.Get("ETag"); etag != "" && s.Revision.Primary == "etag" {
		doc.Revision = etag // the revision of the bytes read
	}
	return s.content(doc, resp)
}
