package tenantmcp

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
)

// Guide is a connector's usage guide as the guide tool serves it: the
// Markdown cut into its opening summary and its "## " sections.
type Guide struct {
	Connector string    `json:"connector"`
	Summary   string    `json:"summary"`
	Sections  []Section `json:"sections"`
	// Required says the guide must be read before the connector's
	// actions are called (the manifest's docs.guide_required).
	Required bool `json:"required"`
}

// Section is one "## " section of a guide.
type Section struct {
	Title string `json:"title"`
	Text  string `json:"text"`
}

// maxGuideSummary bounds a guide's summary.
const maxGuideSummary = 400

var guides sync.Map // *registry.Connector → *Guide (nil guide: none)

// parseGuide is conn's guide, parsed once; nil when it has none.
func parseGuide(conn *registry.Connector) *Guide {
	if v, ok := guides.Load(conn); ok {
		return v.(*Guide)
	}
	var g *Guide
	if strings.TrimSpace(conn.Guide) != "" {
		g = &Guide{Connector: "connector:" + conn.Manifest.ID, Required: conn.Manifest.Docs.GuideRequired, Sections: []Section{}}
		var intro []string
		cur := -1
		for _, line := range strings.Split(conn.Guide, "\n") {
			if title, ok := strings.CutPrefix(line, "## "); ok {
				g.Sections = append(g.Sections, Section{Title: strings.TrimSpace(title)})
				cur = len(g.Sections) - 1
				continue
			}
			if cur < 0 {
				if !strings.HasPrefix(line, "# ") {
					intro = append(intro, line)
				}
				continue
			}
			g.Sections[cur].Text += line + "\n"
		}
		for i := range g.Sections {
			g.Sections[i].Text = strings.TrimSpace(g.Sections[i].Text)
		}
		g.Summary = clip(strings.Join(strings.Fields(strings.Join(intro, " ")), " "), maxGuideSummary)
		if g.Summary == "" {
			g.Summary = clip(conn.Manifest.Docs.LLMShortDescription, maxGuideSummary)
		}
	}
	v, _ := guides.LoadOrStore(conn, g)
	return v.(*Guide)
}

// Reasons of a guide_required refusal.
const (
	// ReasonConnectorRequired: the connector's guide is marked required.
	ReasonConnectorRequired = "connector_required"
	// ReasonApprovalRequired: the action is destructive and the
	// connector's guide says how such actions are approved.
	ReasonApprovalRequired = "approval_required"
	// ReasonSchemaTruncated: the action's input schema does not fit a
	// describe answer; the guide says how its arguments are built.
	ReasonSchemaTruncated = "schema_truncated"
)

// readGuides are the connectors whose guide the agent read in this
// conversation, from its guide token.
type readGuides map[string]bool

// guideReason says why op of conn needs its guide read first, or "".
func guideReason(conn *registry.Connector, op *registry.Operation, read readGuides) string {
	g := parseGuide(conn)
	if g == nil || read[conn.Manifest.ID] {
		return ""
	}
	switch {
	case g.Required:
		return ReasonConnectorRequired
	case safetyOf(op) == SafetyDestructive:
		return ReasonApprovalRequired
	case op.InputSchema != nil && schemaTooLarge(op):
		return ReasonSchemaTruncated
	}
	return ""
}

// schemaTooLarge reports whether op's input schema does not fit a
// describe answer.
func schemaTooLarge(op *registry.Operation) bool {
	raw, _ := json.Marshal(op.InputSchema)
	return len(raw) > MaxSchemaBytes
}

// guideRequired is the refusal of a call made before the guide was read.
func guideRequired(conn *registry.Connector, reason string) error {
	why := map[string]string{
		ReasonConnectorRequired: "its connector's guide must be read first",
		ReasonApprovalRequired:  "it is destructive, and its connector's guide says how such actions are approved",
		ReasonSchemaTruncated:   "its input schema is too large to describe whole, and its connector's guide says how to build its arguments",
	}[reason]
	return &guideError{err: switchboard.E(switchboard.ErrForbidden, "guide_required",
		"this action cannot be called yet: %s. Call guide with {\"connector\": \"connector:%s\"}, then call again with the guideToken it returns",
		why, conn.Manifest.ID), reason: reason, connector: "connector:" + conn.Manifest.ID}
}

// guideError is a guide_required refusal with its reason.
type guideError struct {
	err               *switchboard.Error
	reason, connector string
}

func (e *guideError) Error() string { return e.err.Error() }
func (e *guideError) Unwrap() error { return e.err }

// Guide tokens: the connectors an agent read the guide of, sealed (AES-GCM
// under the server's keyring, bound to the tenant, caller and agent) so
// that any replica reads them back and nobody forges one.
const (
	guideTokenTTL   = 24 * time.Hour
	guideTokenOwner = "tenantmcp:guide-token"
	maxGuideToken   = 4096
)

type guideClaims struct {
	Read    []string `json:"r"`
	Expires int64    `json:"x"`
}

// guideTokens seals and opens guide tokens.
type guideTokens struct {
	keys *secrets.Keyring
	now  func() time.Time
}

func newGuideTokens(keys *secrets.Keyring, now func() time.Time) *guideTokens {
	if keys == nil {
		k := make([]byte, 32)
		rand.Read(k)
		keys, _ = secrets.NewKeyring(k)
	}
	if now == nil {
		now = time.Now
	}
	return &guideTokens{keys: keys, now: now}
}

func tokenRef(p *auth.Principal) secrets.Ref {
	caller := ""
	if p.Caller != nil {
		caller = string(p.Caller.ID)
	}
	return secrets.Ref{Tenant: p.Tenant, Owner: guideTokenOwner, Name: caller + "\x00" + p.AgentID}
}

// read returns the connectors a token says were read; a missing,
// expired or foreign token reads as none (the agent is asked to read the
// guide again), a malformed one is invalid_arguments.
func (gt *guideTokens) read(p *auth.Principal, token string) (readGuides, error) {
	read := readGuides{}
	if token == "" {
		return read, nil
	}
	keyID, sealed, ok := strings.Cut(token, ".")
	ct, err := base64.RawURLEncoding.DecodeString(sealed)
	if !ok || err != nil || len(token) > maxGuideToken {
		return nil, invalid("\"guideToken\" is not a token the guide tool returned")
	}
	pt, err := gt.keys.Open(tokenRef(p), keyID, ct)
	if err != nil {
		return read, nil
	}
	var c guideClaims
	if json.Unmarshal(pt, &c) != nil || gt.now().Unix() > c.Expires {
		return read, nil
	}
	for _, id := range c.Read {
		read[id] = true
	}
	return read, nil
}

// issue returns a token saying read and connector were read.
func (gt *guideTokens) issue(p *auth.Principal, read readGuides, connector string) (string, error) {
	c := guideClaims{Expires: gt.now().Add(guideTokenTTL).Unix()}
	for id := range read {
		c.Read = append(c.Read, id)
	}
	if !read[connector] {
		c.Read = append(c.Read, connector)
	}
	slices.Sort(c.Read)
	pt, _ := json.Marshal(c)
	keyID, ct, err := gt.keys.Seal(tokenRef(p), pt)
	if err != nil {
		return "", err
	}
	tok := keyID + "." + base64.RawURLEncoding.EncodeToString(ct)
	if len(tok) > maxGuideToken {
		return "", switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "too many guides read in one token; start again without guideToken")
	}
	return tok, nil
}

// GuideArgs are the arguments of the guide tool.
type GuideArgs struct {
	Connector  string `json:"connector"`
	GuideToken string `json:"guideToken,omitempty"`
}

// GuideResult is the guide tool's answer: the guide and the token that
// says it was read.
type GuideResult struct {
	*Guide
	GuideToken string `json:"guideToken"`
}

// guide answers the guide of one of the agent's connectors.
func (s *Server) guide(cat *catalog, p *auth.Principal, args GuideArgs) (*GuideResult, error) {
	id := strings.TrimPrefix(strings.TrimSpace(args.Connector), "connector:")
	if id == "" {
		return nil, invalid("guide needs \"connector\": connector:<id>, as describe names it")
	}
	var conn *registry.Connector
	for _, t := range cat.targets {
		if t.Connector.Manifest.ID == id || t.Instance.Slug == id {
			conn = t.Connector
			break
		}
	}
	if conn == nil {
		return nil, unknownConnector(args.Connector)
	}
	g := parseGuide(conn)
	if g == nil {
		g = &Guide{Connector: "connector:" + conn.Manifest.ID, Summary: clip(conn.Manifest.Docs.LLMShortDescription, maxGuideSummary), Sections: []Section{}}
	}
	read, err := s.tokens.read(p, args.GuideToken)
	if err != nil {
		return nil, err
	}
	tok, err := s.tokens.issue(p, read, conn.Manifest.ID)
	if err != nil {
		return nil, err
	}
	return &GuideResult{Guide: g, GuideToken: tok}, nil
}
