package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry"
)

// actionArg is the argument that selects an entity's action.
const actionArg = "action"

// toolHandler handles tools/call of entity e: it picks the operation by
// the "action" argument and calls it through the gateway with the other
// arguments.
func (h *handler) toolHandler(e *registry.Entity) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		p, t, ok := fromRequest(req)
		if !ok {
			// Unreachable behind the middleware: refuse rather than call.
			return errorResult(switchboard.E(switchboard.ErrUnauthorized, "unauthorized", "the call is not authenticated")), nil
		}
		log := h.callLog(req, p, t)
		if fromApp(req.Params.Meta) {
			if res := h.refuseView(ctx, p, t, log, e, req.Params.Arguments); res != nil {
				return res, nil
			}
		}
		target, _ := req.Params.Meta[gateway.TargetUserArg].(string)
		if s, ok := req.Extra.TokenInfo.Extra[extraSurface].(*gateway.Surface); ok {
			ctx = gateway.WithSurface(ctx, s)
		}
		return h.callTool(ctx, e, p, t, log, req.Params.Arguments, target), nil
	}
}

// callTool is a tools/call of entity e, for p on t, with the request's
// arguments and the targetUserId of its params._meta (metaTarget, "" when
// absent or not a string). The SDK's tool handler calls it.
func (h *handler) callTool(ctx context.Context, e *registry.Entity, p *auth.Principal, t *gateway.Target, log gateway.CallLog, rawArgs json.RawMessage, metaTarget string) *sdk.CallToolResult {
	resp, res := h.callEntity(ctx, e, p, t, log, rawArgs, metaTarget, false, nil)
	if res != nil {
		return res
	}
	return successResult(resp, e.OutputSchema != nil)
}

// callEntity makes the call callTool describes and returns either the
// answer to render as a success (resp) or the result to give as is (res).
// The fast path calls it, to render a success without the SDK's types,
// with asStrings set: then arguments that are all strings go to the
// gateway as a list, without a map (the SDK's path keeps the map, so the
// differential test holds one to the other), and into, when set, takes
// the response of such a call (the request's allocation).
func (h *handler) callEntity(ctx context.Context, e *registry.Entity, p *auth.Principal, t *gateway.Target, log gateway.CallLog, rawArgs json.RawMessage, metaTarget string, asStrings bool, into *registry.Response) (resp *registry.Response, res *sdk.CallToolResult) {
	// The call's attributes; refusals before the action is known add
	// these.
	who := [...]slog.Attr{slog.String("agent", p.AgentID), slog.String("caller", string(p.Caller.ID)), slog.String("tool", e.Name)}
	refused := func() { log.With(who[:]...).Info("tool call refused", "code", "invalid_arguments") }

	var args map[string]any
	var list []registry.StringArg
	if asStrings {
		// The list outlives no call: its array is pooled (on the stack
		// it would escape, through the request the registry builds).
		buf := stringArgsPool.Get().(*[]registry.StringArg)
		defer func() {
			clear((*buf)[:cap(*buf)])
			stringArgsPool.Put(buf)
		}()
		list, asStrings = stringArgs((*buf)[:0], rawArgs)
		if asStrings && cap(list) <= 64 {
			*buf = list[:0] // grown for this call: kept, unless large
		}
	}
	if !asStrings {
		var err error
		if args, err = decodeArgs(rawArgs); err != nil {
			refused()
			return nil, errorResult(err)
		}
	}
	// arg returns an argument's value when it is a string, and whether
	// the argument is there.
	arg := func(name string) (string, bool) {
		if !asStrings {
			v, ok := args[name]
			s, _ := v.(string)
			return s, ok
		}
		for _, a := range list {
			if a.Name == name {
				return a.Value, true
			}
		}
		return "", false
	}
	drop := func(name string) {
		if !asStrings {
			delete(args, name)
			return
		}
		list = slices.DeleteFunc(list, func(a registry.StringArg) bool { return a.Name == name })
	}
	// targetUserId (params._meta or an argument) is never sent
	// upstream; it counts only for trusted callers (Principal.Subject).
	target := metaTarget
	if s, ok := arg(gateway.TargetUserArg); ok {
		drop(gateway.TargetUserArg)
		if target == "" {
			target = s // "" when not a string, as unset
		}
	}
	p = p.WithTarget(target)
	action, hasAction := arg(actionArg)
	if action == registry.DescribeAction {
		// Answered locally: the upstream is not called.
		target, _ := arg(registry.DescribeTarget)
		path, _ := arg(registry.DescribePath)
		doc, err := e.DescribeAt(target, path)
		if err != nil {
			refused()
			return nil, errorResult(err)
		}
		return &registry.Response{Status: 200, Body: doc}, nil
	}
	ac, found := e.Action(action)
	if !found || ac.Op == nil {
		refused()
		return nil, errorResult(badAction(e, action, hasAction))
	}
	drop(actionArg)
	// Added to log when a line is written: most calls write none.
	call := [...]slog.Attr{who[0], who[1], who[2], slog.String("action", ac.Name), slog.String("operation", ac.Op.Name)}

	var err error
	if asStrings {
		resp, err = h.g.CallStringsInto(ctx, t, p, ac.Op, list, into)
	} else {
		resp, err = h.g.Call(ctx, t, p, ac.Op, args)
	}
	if err != nil {
		gateway.LogError(log.With(call[:]...), "tool call failed", err)
		return nil, errorResult(err)
	}
	if log.Enabled(slog.LevelDebug) {
		log.With(call[:]...).Debug("tool call", "status", resp.Status)
	}
	return resp, nil
}

// fromRequest returns what the middleware authorized, from TokenInfo.
func fromRequest(req *sdk.CallToolRequest) (*auth.Principal, *gateway.Target, bool) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return nil, nil, false
	}
	p, ok1 := req.Extra.TokenInfo.Extra[extraPrincipal].(*auth.Principal)
	t, ok2 := req.Extra.TokenInfo.Extra[extraTarget].(*gateway.Target)
	return p, t, ok1 && ok2 && p != nil && t != nil
}

// decodeArgs decodes a tools/call's arguments as encoding/json decodes
// them into a map[string]any. A valid object is split by the strict
// scanner and only its non-string values go through encoding/json: a
// map decoded by reflection cost a tenth of a tools/call's allocations.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	if raw[0] == '{' && utf8.Valid(raw) && json.Valid(raw) {
		var buf [16]member
		if members, ok := scanObject(buf[:0], raw); ok {
			if args, ok := membersMap(raw, members); ok {
				return args, nil
			}
		}
	}
	args := map[string]any{}
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "the arguments must be a JSON object")
	}
	return args, nil
}

// stringArgsPool holds the arrays of callEntity's string arguments.
var stringArgsPool = sync.Pool{New: func() any {
	s := make([]registry.StringArg, 0, 8)
	return &s
}}

// stringArgs appends to dst the arguments raw holds when they are an
// object whose members are strings with distinct names, as decodeArgs
// would decode them (no arguments for an empty raw or null); false for
// anything else, which decodeArgs decodes. String values without escapes
// are substrings of one copy of the object.
func stringArgs(dst []registry.StringArg, raw json.RawMessage) ([]registry.StringArg, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return dst, true
	}
	if raw[0] != '{' || !utf8.Valid(raw) || !json.Valid(raw) {
		return nil, false
	}
	var buf [16]member
	members, ok := scanObject(buf[:0], raw)
	if !ok {
		return nil, false
	}
	var text string
	for i, m := range members {
		if m.raw[0] != '"' {
			return nil, false
		}
		for _, earlier := range members[:i] {
			if earlier.key == m.key {
				return nil, false
			}
		}
		var v string
		if start := cap(raw) - cap(m.raw); bytes.IndexByte(m.raw, '\\') < 0 && start >= 0 && start+len(m.raw) <= len(raw) {
			if text == "" {
				text = string(raw)
			}
			v = text[start+1 : start+len(m.raw)-1]
		} else if v, ok = unquote(m.raw); !ok {
			return nil, false
		}
		dst = append(dst, registry.StringArg{Name: m.key, Value: v})
	}
	return dst, true
}

// membersMap is the map of the members of object, a later member winning
// over an earlier one of the same name (as in encoding/json). members
// are object's, split by scanObject. String values without escapes are
// substrings of one copy of object (one allocation, not one per value).
func membersMap(object []byte, members []member) (map[string]any, bool) {
	args := make(map[string]any, len(members))
	var text string
	for _, m := range members {
		if m.raw[0] == '"' {
			// m.raw is a slice of object: its offset is the difference
			// of their capacities.
			if start := cap(object) - cap(m.raw); bytes.IndexByte(m.raw, '\\') < 0 && start >= 0 && start+len(m.raw) <= len(object) {
				if text == "" {
					text = string(object)
				}
				args[m.key] = text[start+1 : start+len(m.raw)-1]
				continue
			}
			s, ok := unquote(m.raw)
			if !ok {
				return nil, false
			}
			args[m.key] = s
			continue
		}
		var v any
		if err := json.Unmarshal(m.raw, &v); err != nil {
			return nil, false
		}
		args[m.key] = v
	}
	return args, true
}

// badAction names the valid actions of e.
func badAction(e *registry.Entity, action string, present bool) error {
	names := make([]string, 0, len(e.Actions)+1)
	for _, a := range e.Actions {
		names = append(names, a.Name)
	}
	names = append(names, registry.DescribeAction)
	valid := strings.Join(names, ", ")
	if !present {
		return switchboard.E(switchboard.ErrInvalid, "invalid_arguments",
			"%s needs an %q argument, one of: %s", e.Name, actionArg, valid)
	}
	if action == "" {
		return switchboard.E(switchboard.ErrInvalid, "invalid_arguments",
			"%s: %q must be a non-empty string, one of: %s", e.Name, actionArg, valid)
	}
	if len(action) > 40 {
		action = action[:40] + "…"
	}
	return switchboard.E(switchboard.ErrInvalid, "invalid_arguments",
		"%s has no action %q; valid actions: %s", e.Name, action, valid)
}

// successResult renders an upstream answer: the body as text, and as
// structured content when it is JSON (an object as is, anything else as
// {"result": ...}). A tool with an output schema always returns structured
// content (clients require it): a body that is not JSON is
// {"result": text}, as the schema's fallback branch says.
func successResult(resp *registry.Response, hasSchema bool) *sdk.CallToolResult {
	body := bytes.TrimSpace(resp.Body)
	if len(body) == 0 {
		return &sdk.CallToolResult{
			Content:           []sdk.Content{&sdk.TextContent{Text: `{"result":null}`}},
			StructuredContent: map[string]any{"result": nil},
		}
	}
	if binaryAnswer(resp.ContentType) {
		return binaryResult(resp, hasSchema)
	}
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(body)}}}
	var v any
	if json.Unmarshal(body, &v) == nil {
		if obj, ok := v.(map[string]any); ok {
			res.StructuredContent = obj
		} else {
			res.StructuredContent = map[string]any{"result": v}
		}
	} else if hasSchema {
		res.StructuredContent = map[string]any{"result": string(body)}
	}
	return res
}

// errorResult renders a failure as a tool result with isError, its text
// and structured content both {"error": {"code", "message",
// "retryAfterMs"?}}.
func errorResult(err error) *sdk.CallToolResult {
	b := switchboard.ErrorBody{Error: switchboard.DetailOf(err)}
	text, _ := json.Marshal(b)
	var structured map[string]any
	_ = json.Unmarshal(text, &structured)
	return &sdk.CallToolResult{
		IsError:           true,
		Content:           []sdk.Content{&sdk.TextContent{Text: string(text)}},
		StructuredContent: structured,
	}
}

// MaxBinaryAnswer bounds the bytes of a binary answer embedded in a tool
// result; a larger one is described (media type, size) but not embedded.
const MaxBinaryAnswer = 1 << 20

// binaryAnswer reports whether an upstream answer of media type ct is
// neither JSON nor text, and so must not be passed on as text.
func binaryAnswer(ct string) bool {
	base, _, _ := strings.Cut(ct, ";")
	base = strings.ToLower(strings.TrimSpace(base))
	switch {
	case base == "", strings.HasPrefix(base, "text/"), base == "application/json", strings.HasSuffix(base, "+json"),
		base == "application/xml", strings.HasSuffix(base, "+xml"), base == "application/x-www-form-urlencoded":
		return false
	}
	return true
}

// binaryResult is a binary upstream answer as an embedded MCP resource
// with its media type, plus a line of text saying what it is; over
// MaxBinaryAnswer the bytes are left out and the text says so.
func binaryResult(resp *registry.Response, hasSchema bool) *sdk.CallToolResult {
	ct, _, _ := strings.Cut(resp.ContentType, ";")
	ct = strings.TrimSpace(ct)
	n := len(resp.Body)
	info := map[string]any{"mediaType": ct, "bytes": n, "embedded": n <= MaxBinaryAnswer}
	text, _ := json.Marshal(map[string]any{"result": info})
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}}
	if n <= MaxBinaryAnswer {
		res.Content = append(res.Content, &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{
			URI: "switchboard:answer", MIMEType: ct, Blob: bytes.Clone(resp.Body)}})
	}
	if hasSchema {
		res.StructuredContent = map[string]any{"result": info}
	}
	return res
}
