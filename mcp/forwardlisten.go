package mcp

import (
	"context"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/gateway"
	"github.com/switchboardhq/switchboard/registry/mcprelay"
)

// subscriptions/listen of an instance proxying an MCP server (SEP-2575,
// 2026-07-28): the caller's listen stream takes the proxied server's
// list-changed notifications and the updates of the resources it names,
// as long as the caller listens. The SDK's server answers the listen
// itself (its acknowledgement, with the kinds granted, then the wait until
// the caller goes); forwardListen registers the caller with the
// instance's client session to the proxied server (mcprelay.Listen),
// through the gateway like any forwarded request (validateAgent, audit),
// and what the proxied server sends then goes on the caller's stream,
// tagged with its subscription id. The listen ends when the session to the
// proxied server does, so that the caller listens again on a new one.
//
// The SDK's server sends list-changed notifications only for changes of
// its own features, to every subscribed session; an instance's are the
// proxied server's, for its callers only. So a notification is handed to
// the caller's session as a progress notification carrying the one to
// send in its context, which relayNotifications (a sending middleware)
// sends in its place.

// callerListen is one caller's listen stream.
type callerListen struct {
	ss  *sdk.ServerSession
	ctx context.Context

	mu sync.Mutex
	// id is the listen's subscription id and granted the kinds the SDK's
	// acknowledgement granted; nothing is sent before it (acked).
	id      any
	granted sdk.NotificationSubscriptions
	acked   bool
}

// listens are the listen streams in progress, by caller session (one
// listen per stateless session).
var listens sync.Map // *sdk.ServerSession -> *callerListen

type relayedKey struct{}

// listenExtraKey carries a listen's request extra (its authorization) to
// the subscriptions of its resources, which the SDK's server makes without.
type listenExtraKey struct{}

// relayed is a notification to send on a caller's stream in place of the
// progress notification whose context carries it.
type relayed struct {
	method string
	params sdk.Params
}

// send sends the caller a notification of the proxied server, if the
// caller was granted it.
func (cl *callerListen) send(method, uri string) {
	cl.mu.Lock()
	ok := cl.acked
	switch method {
	case mcprelay.ToolsListChanged:
		ok = ok && cl.granted.ToolsListChanged
	case mcprelay.PromptsListChanged:
		ok = ok && cl.granted.PromptsListChanged
	case mcprelay.ResourcesListChanged:
		ok = ok && cl.granted.ResourcesListChanged
	}
	meta := sdk.Meta{sdk.MetaKeySubscriptionID: cl.id}
	cl.mu.Unlock()
	if !ok {
		return
	}
	var params sdk.Params
	switch method {
	case mcprelay.ToolsListChanged:
		params = &sdk.ToolListChangedParams{Meta: meta}
	case mcprelay.PromptsListChanged:
		params = &sdk.PromptListChangedParams{Meta: meta}
	case mcprelay.ResourcesListChanged:
		params = &sdk.ResourceListChangedParams{Meta: meta}
	case mcprelay.ResourceUpdated:
		params = &sdk.ResourceUpdatedNotificationParams{Meta: meta, URI: uri}
	default:
		return
	}
	ctx := context.WithValue(cl.ctx, relayedKey{}, &relayed{method: method, params: params})
	cl.ss.NotifyProgress(ctx, &sdk.ProgressNotificationParams{})
}

// relayNotifications is the sending middleware of the servers of
// forwarding connectors: it notes a listen's acknowledgement (its
// subscription id and the kinds granted), and sends a relayed
// notification in place of the progress notification carrying it.
func relayNotifications(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		ss, _ := req.GetSession().(*sdk.ServerSession)
		switch method {
		case "notifications/progress":
			if r, ok := ctx.Value(relayedKey{}).(*relayed); ok && ss != nil {
				return next(ctx, r.method, &sdk.ServerRequest[sdk.Params]{Session: ss, Params: r.params})
			}
		case "notifications/subscriptions/acknowledged":
			ack, _ := req.GetParams().(*sdk.SubscriptionsAcknowledgedParams)
			v, ok := listens.Load(ss)
			if ok && ack != nil {
				res, err := next(ctx, method, req)
				cl := v.(*callerListen)
				cl.mu.Lock()
				cl.id, cl.granted, cl.acked = ack.Meta[sdk.MetaKeySubscriptionID], ack.Notifications, true
				cl.mu.Unlock()
				return res, err
			}
		}
		return next(ctx, method, req)
	}
}

// forwardListen serves a subscriptions/listen of an instance proxying a
// server (see above).
func (h *handler) forwardListen(ctx context.Context, next sdk.MethodHandler, method string, req sdk.Request) (sdk.Result, error) {
	lr, _ := req.(*sdk.SubscriptionsListenRequest)
	ss, _ := req.GetSession().(*sdk.ServerSession)
	if lr == nil || lr.Params == nil || lr.Params.Notifications == nil || ss == nil {
		return next(ctx, method, req) // the SDK refuses it
	}
	p, t, log, err := h.forwardedBy(req)
	if err != nil {
		return nil, err
	}
	want := lr.Params.Notifications
	ctx, cancel := context.WithCancel(context.WithValue(ctx, listenExtraKey{}, req.GetExtra()))
	defer cancel()
	cl := &callerListen{ss: ss, ctx: ctx}
	l := &mcprelay.Listener{Tools: want.ToolsListChanged, Prompts: want.PromptsListChanged,
		Resources: want.ResourcesListChanged, URIs: want.ResourceSubscriptions,
		Notify: cl.send, Done: make(chan struct{})}
	var stop func()
	_, err = h.g.Forward(ctx, t, p, method, func(ctx context.Context, s *sdk.ClientSession) (sdk.Result, error) {
		var err error
		stop, err = mcprelay.Listen(ctx, s, l)
		return nil, err
	})
	if err != nil {
		gateway.LogError(log, "forwarded "+method+" failed", err)
		return nil, forwardError(method, err, true)
	}
	defer stop()
	listens.Store(ss, cl)
	defer listens.Delete(ss)
	go func() {
		select {
		case <-l.Done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return next(ctx, method, req)
}
