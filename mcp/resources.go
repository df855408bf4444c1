package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/knowledge"
	"github.com/switchboardhq/switchboard/registry"
)

// MCP Resources of knowledge sources (package knowledge). An instance
// whose connector's mapping declares a knowledge section serves its
// document hierarchy as resources: resources/templates/list,
// resources/list, resources/read, and the checkAccess action of the
// knowledge tool. These requests are not agent calls: the agent allowlist
// does not guard them; knowledge.Guard decides who reads. Without any
// credential, the handshake (initialize, ping, notifications), the
// templates and the profile resource are served, and nothing else.

// anonymousBearer stands in for the missing token of an anonymous
// Resource request, so that the SDK's bearer middleware passes it on; the
// verifier reads what our guard decided from the context, never this.
const anonymousBearer = "Bearer switchboard-anonymous"

// resourceFlow reports whether the request is one the knowledge guard
// handles rather than the agent path: a resources/* request, a
// knowledge checkAccess call, or the handshake; all on an
// instance whose connector is a knowledge source. It answers it and
// reports true, or reports false and leaves the request to the agent path.
// env is the request's one message, well formed.
func (h *handler) resourceFlow(w http.ResponseWriter, r *http.Request, log gateway.CallLog, tenantSlug, instanceSlug string, body []byte, env *envelope) bool {
	if !env.hasMethod {
		return false
	}
	_, hasAuth := r.Header["Authorization"]
	resource := strings.HasPrefix(env.method, "resources/")
	if env.method == "tools/call" {
		resource = toolNameIs(env, knowledge.ToolName)
	}
	// The handshake carries nothing the public profile does not say; a
	// knowledge-sync caller, which no allowlist names, needs it too.
	handshake := env.method == "initialize" || env.method == "ping" || strings.HasPrefix(env.method, "notifications/")
	if !resource && !handshake {
		return false
	}
	ctx := r.Context()
	t, err := h.g.Resolve(ctx, tenantSlug, instanceSlug)
	if err != nil {
		if !resource {
			return false // the agent path answers it
		}
		writeRPCError(w, requestID(body), err)
		return true
	}
	src, err := knowledge.Of(t.Connector)
	if src == nil || err != nil {
		if err != nil {
			log.Warn("knowledge section not served", "connector", t.Connector.Manifest.ID, "err", err)
		}
		return false
	}
	a := &authorized{target: t, log: log, surface: surfaceOf(r.Header.Get(headerVersion)), source: src}
	if hasAuth {
		p, person, err := h.authenticateReader(ctx, r, t, tenantSlug)
		if err != nil {
			gateway.LogError(log, "mcp request refused", err)
			h.challenge(w, r, switchboard.ProblemOf(err).Status, switchboard.CodeOf(err))
			writeRPCError(w, requestID(body), err)
			return true
		}
		a.principal, a.person = p, person
	}
	if msg := checkParamHeader(r, env, t.Spec()); msg != "" {
		writeRPCError(w, requestID(body), switchboard.E(switchboard.ErrInvalid, "header_mismatch", "%s", msg))
		return true
	}
	rr := withAuthorized(r, a)
	if !hasAuth {
		rr.Header = r.Header.Clone()
		rr.Header.Set("Authorization", anonymousBearer)
	}
	h.serveSDK(w, rr, body)
	return true
}

// authenticateReader authenticates a Resource request: an MCP access
// token (a signed-in person, person true) or a caller credential. The
// agent allowlist is not checked.
func (h *handler) authenticateReader(ctx context.Context, r *http.Request, t *gateway.Target, tenantSlug string) (*auth.Principal, bool, error) {
	az := h.opts.Authorization
	token, hasBearer := bearerToken(r)
	if hasBearer && az != nil && az.isOAuthToken(token) {
		sub, client, err := az.verify(ctx, token, publicBase(h.opts.PublicURL, r)+r.URL.Path)
		if err != nil {
			return nil, false, err
		}
		return accessTokenPrincipal(tenantInstance{tenantID: t.Instance.TenantID, tenantSlug: tenantSlug}, sub, client), true, nil
	}
	p, err := h.g.Authenticate(ctx, r, tenantSlug)
	return p, false, err
}

// knowledgeMiddleware answers the Resource methods of a knowledge source
// and its checkAccess tool; other methods go on.
func (h *handler) knowledgeMiddleware(src *knowledge.Source) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			switch method {
			case "resources/templates/list":
				return templatesResult(src), nil
			case "resources/list", "resources/read", "tools/call":
			default:
				return next(ctx, method, req)
			}
			a := authorizedOf(req)
			if a == nil || a.source != src {
				// Reached through the agent path (another connector
				// version's server never holds this middleware).
				return next(ctx, method, req)
			}
			switch p := req.GetParams().(type) {
			case *sdk.ReadResourceParams:
				if p.URI == src.ProfileURI() {
					return profileResult(src), nil
				}
				call, err := h.readerCall(ctx, a, method, p.Meta)
				if err != nil {
					return nil, jsonrpcError(err)
				}
				metadataOnly, _ := p.Meta[knowledge.MetaMetadataOnly].(bool)
				doc, err := src.Read(ctx, call, p.URI, metadataOnly)
				if err != nil {
					return nil, resourceError(err, p.URI)
				}
				return readResult(doc), nil
			case *sdk.ListResourcesParams:
				call, err := h.readerCall(ctx, a, method, p.Meta)
				if err != nil {
					return nil, jsonrpcError(err)
				}
				parent, _ := p.Meta[knowledge.MetaParent].(string)
				size := 0
				if v, ok := p.Meta[knowledge.MetaPageSize].(float64); ok {
					size = int(max(min(v, 1<<20), -1))
					if size == 0 {
						size = -1 // asked for 0: clamped up to 1
					}
				}
				page, err := src.List(ctx, call, parent, p.Cursor, size)
				if err != nil {
					return nil, resourceError(err, parent)
				}
				return listResult(page), nil
			case *sdk.CallToolParamsRaw:
				return h.checkAccess(ctx, a, src, p)
			}
			return next(ctx, method, req)
		}
	}
}

// authorizedOf is what the endpoint authorized for req.
func authorizedOf(req sdk.Request) *authorized {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	a, _ := extra.TokenInfo.Extra[extraAuthorized].(*authorized)
	return a
}

// readerCall runs the guard for a request whose _meta is meta and returns
// the upstream call of the reader it decides.
func (h *handler) readerCall(ctx context.Context, a *authorized, method string, meta sdk.Meta) (knowledge.Call, error) {
	target, _ := meta[knowledge.MetaTargetUser].(string)
	d, err := knowledge.Guard(knowledge.Asker{Principal: a.principal, Person: a.person}, a.source.ResourceAccess, target)
	t := a.target
	if d.TargetIgnored {
		a.log.Info("targetUserId ignored", "code", "target_user_ignored", "method", method)
		h.g.Refused(ctx, t.Tenant.Slug, t.Instance.Slug, a.principal, t, method,
			switchboard.E(switchboard.ErrForbidden, "target_user_ignored", "this caller may not name a targetUserId"))
	}
	if err != nil {
		gateway.LogError(a.log, "resource request refused", err)
		if a.principal != nil {
			h.g.Refused(ctx, t.Tenant.Slug, t.Instance.Slug, a.principal, t, method, err)
		}
		return nil, err
	}
	if d.CheckMember != "" {
		if err := h.g.Callers().CheckMember(ctx, d.Reader, d.CheckMember); err != nil {
			h.g.Refused(ctx, t.Tenant.Slug, t.Instance.Slug, a.principal, t, method, err)
			return nil, err
		}
	}
	reader := d.Reader
	return func(cctx context.Context, op *registry.Operation, args map[string]any) (*registry.Response, error) {
		if s := a.surface; s != nil {
			cctx = gateway.WithSurface(cctx, s)
		}
		return h.g.CallResource(cctx, t, reader, op, args)
	}, nil
}

// checkAccess answers the knowledge tool: action checkAccess with uris
// (at most the source's cap) for the reader the guard decides.
func (h *handler) checkAccess(ctx context.Context, a *authorized, src *knowledge.Source, p *sdk.CallToolParamsRaw) (sdk.Result, error) {
	var args struct {
		Action string   `json:"action"`
		URIs   []string `json:"uris"`
		Target string   `json:"targetUserId"`
	}
	if len(p.Arguments) > 0 {
		if err := json.Unmarshal(p.Arguments, &args); err != nil {
			return errorResult(switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "the arguments must be an object with action and uris")), nil
		}
	}
	if args.Action != knowledge.CheckAccessAction {
		return errorResult(switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "%s has one action: %q", knowledge.ToolName, knowledge.CheckAccessAction)), nil
	}
	meta := p.Meta
	if args.Target != "" {
		meta = sdk.Meta{knowledge.MetaTargetUser: args.Target}
	}
	call, err := h.readerCall(ctx, a, "tools/call", meta)
	if err != nil {
		return errorResult(err), nil
	}
	results, err := src.CheckAccess(ctx, call, args.URIs)
	if err != nil {
		return errorResult(err), nil
	}
	out := map[string]any{"results": results}
	text, _ := json.Marshal(out)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}, StructuredContent: out}, nil
}

// knowledgeTool is the access check's tool, for applications: its
// _meta and annotations say it is not for the model.
func knowledgeTool(src *knowledge.Source) *sdk.Tool {
	schema := json.RawMessage(`{"type":"object","properties":{` +
		`"action":{"type":"string","enum":["` + knowledge.CheckAccessAction + `"]},` +
		`"uris":{"type":"array","items":{"type":"string"},"maxItems":` + itoa(src.MaxURIs) + `},` +
		`"targetUserId":{"type":"string"}},"required":["action","uris"]}`)
	return &sdk.Tool{
		Name:        knowledge.ToolName,
		Title:       "Knowledge access check",
		Description: "For knowledge-base sync services, not for the model: checkAccess answers, per resource URI, whether the reader (or targetUserId) may read it: allowed, denied or not_found.",
		InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, Title: "Knowledge access check (not for the model)"},
		Meta:        sdk.Meta{"audience": []string{"application"}, "modelVisible": false},
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func templatesResult(src *knowledge.Source) *sdk.ListResourceTemplatesResult {
	res := &sdk.ListResourceTemplatesResult{ResourceTemplates: []*sdk.ResourceTemplate{}}
	for _, t := range src.Templates() {
		rt := &sdk.ResourceTemplate{URITemplate: t.URITemplate, Name: t.Level, Meta: sdk.Meta{"kind": t.Kind}}
		res.ResourceTemplates = append(res.ResourceTemplates, rt)
	}
	return res
}

func profileResult(src *knowledge.Source) *sdk.ReadResourceResult {
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: src.ProfileURI(), MIMEType: "application/json", Text: string(src.Profile())}}}
}

func entryMeta(e *knowledge.Entry) sdk.Meta {
	m := sdk.Meta{"kind": e.Kind, "level": e.Level}
	if e.Revision != "" {
		m["revision"] = e.Revision
	}
	return m
}

// listed is resources/list's result with each entry's revision at the
// entry's top level, where the knowledge contract puts it (and in
// _meta.revision, which earlier clients read). sdk.Resource has no such
// field, and the SDK sends a result as encoding/json renders it: the
// entries are rendered here, each an sdk.Resource with the revision
// beside its fields. The embedded SDK result keeps the Result methods the
// SDK calls (its _meta, the resultType of newer protocol revisions); its
// own Resources field is shadowed by ours.
type listed struct {
	sdk.ListResourcesResult
	Resources []listedResource `json:"resources"`
}

type listedResource struct {
	*sdk.Resource
	Revision string `json:"revision,omitempty"`
}

func listResult(page *knowledge.Page) *listed {
	res := &listed{Resources: make([]listedResource, 0, len(page.Entries))}
	res.NextCursor = page.Next
	for i := range page.Entries {
		e := &page.Entries[i]
		r := &sdk.Resource{URI: e.URI, Name: e.Name, MIMEType: e.MimeType, Size: e.Size, Meta: entryMeta(e)}
		res.Resources = append(res.Resources, listedResource{Resource: r, Revision: e.Revision})
	}
	return res
}

// read is resources/read's result with the document's revision at the
// result's top level (as well as in _meta.revision). The SDK's
// ReadResourceResult has no such field and renders itself (MarshalJSON,
// for the resultType of newer revisions): its rendering is taken whole
// and the revision added to it.
type read struct {
	sdk.ReadResourceResult
	Revision string
}

func (r *read) MarshalJSON() ([]byte, error) {
	b, err := r.ReadResourceResult.MarshalJSON()
	if err != nil || r.Revision == "" || len(b) < 2 || b[0] != '{' {
		return b, err
	}
	rev, err := json.Marshal(r.Revision)
	if err != nil {
		return nil, err
	}
	// b is an object with at least "contents": the revision goes first.
	return slices.Concat([]byte(`{"revision":`), rev, []byte{','}, b[1:]), nil
}

func readResult(doc *knowledge.Document) *read {
	meta := entryMeta(&doc.Entry)
	meta["name"] = doc.Name
	if doc.Size > 0 {
		meta["size"] = doc.Size
	}
	if doc.DownloadURL != "" {
		meta["downloadUrl"] = doc.DownloadURL
	}
	c := &sdk.ResourceContents{URI: doc.URI, MIMEType: doc.MimeType, Text: doc.Text, Blob: doc.Blob, Meta: meta}
	res := &read{ReadResourceResult: sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{c}, Meta: sdk.Meta{}}, Revision: doc.Revision}
	if doc.Revision != "" {
		res.Meta["revision"] = doc.Revision
	}
	if doc.DownloadURL != "" {
		res.Meta["downloadUrl"] = doc.DownloadURL
	}
	return res
}

// jsonrpcError is err as the JSON-RPC error the SDK sends: the table's code,
// "code: message" and data.code.
func jsonrpcError(err error) error {
	d := rpcErrorDetail(switchboard.ProblemOf(err))
	data, _ := json.Marshal(d.Data)
	return &jsonrpc.Error{Code: int64(d.Code), Message: d.Message, Data: data}
}

// resourceError is jsonrpcError, except that a missing resource is the SDK's
// "Resource not found" with data.uri, which resourceNotFound gives the
// code of the client's protocol revision.
func resourceError(err error, uri string) error {
	if switchboard.CodeOf(err) == "resource_not_found" {
		data, _ := json.Marshal(map[string]string{"uri": uri})
		return &jsonrpc.Error{Code: switchboard.RPCResourceNotFound, Message: "Resource not found", Data: data}
	}
	return jsonrpcError(err)
}
