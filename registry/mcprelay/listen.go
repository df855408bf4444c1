package mcprelay

import (
	"context"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Notifications that outlive a request: the proxied server's list-changed
// notifications and the updates of subscribed resources reach the callers
// listening on its instance (a subscriptions/listen stream of the
// 2026-07-28 era), each caller only the kinds and resources it asked for.
// A client session to a proxied server receives them through the
// handlers Table.Options installs (the SDK's client opens its own listen
// to a 2026-07-28 server for the list-changed kinds the server declares;
// an earlier server sends them on the session); Listen registers a
// caller's Listener on that session for as long as the caller listens.

// Methods of the notifications a Listener is sent.
const (
	ToolsListChanged     = "notifications/tools/list_changed"
	PromptsListChanged   = "notifications/prompts/list_changed"
	ResourcesListChanged = "notifications/resources/list_changed"
	ResourceUpdated      = "notifications/resources/updated"
)

// Listener is one caller's listen on an instance: the kinds of
// notifications it takes, the resources whose updates it takes, and where
// they go.
type Listener struct {
	Tools, Prompts, Resources bool
	URIs                      []string
	// Notify sends the caller a notification: a list-changed method, or
	// ResourceUpdated with the resource's URI.
	Notify func(method, uri string)
	// Done is closed when the session the listener is registered on ends
	// (the caller's listen should end then, so that the caller listens
	// again, on a new session).
	Done chan struct{}
}

func (l *Listener) wants(method, uri string) bool {
	switch method {
	case ToolsListChanged:
		return l.Tools
	case PromptsListChanged:
		return l.Prompts
	case ResourcesListChanged:
		return l.Resources
	case ResourceUpdated:
		return slices.Contains(l.URIs, uri)
	}
	return false
}

// sessionListeners are the listeners of one client session, and the
// resources the session is subscribed to for them, by URI: the number of
// listeners wanting each.
type sessionListeners struct {
	listeners map[*Listener]struct{}
	subs      map[string]int
}

var hub = struct {
	sync.Mutex
	sessions map[*sdk.ClientSession]*sessionListeners
}{sessions: map[*sdk.ClientSession]*sessionListeners{}}

// unsubscribeWait bounds the unsubscription of a resource no listener
// wants any more.
const unsubscribeWait = 10 * time.Second

// Listen registers l on s (a session of a client built with a Table's
// Options) until stop is called, subscribing s to l's resources that it is
// not subscribed to yet (ctx bounds the subscription). The session's end
// closes l.Done.
func Listen(ctx context.Context, s *sdk.ClientSession, l *Listener) (stop func(), err error) {
	hub.Lock()
	sl := hub.sessions[s]
	fresh := sl == nil
	if fresh {
		sl = &sessionListeners{listeners: map[*Listener]struct{}{}, subs: map[string]int{}}
		hub.sessions[s] = sl
	}
	var subscribe []string
	for _, uri := range l.URIs {
		if sl.subs[uri] == 0 {
			subscribe = append(subscribe, uri)
		}
		sl.subs[uri]++
	}
	sl.listeners[l] = struct{}{}
	hub.Unlock()
	if fresh {
		go func() {
			s.Wait()
			hub.Lock()
			sl := hub.sessions[s]
			delete(hub.sessions, s)
			hub.Unlock()
			if sl != nil {
				for l := range sl.listeners {
					close(l.Done)
				}
			}
		}()
	}
	stop = func() {
		hub.Lock()
		sl := hub.sessions[s]
		var unsubscribe []string
		if sl != nil {
			delete(sl.listeners, l)
			for _, uri := range l.URIs {
				if sl.subs[uri]--; sl.subs[uri] <= 0 {
					delete(sl.subs, uri)
					unsubscribe = append(unsubscribe, uri)
				}
			}
		}
		hub.Unlock()
		if len(unsubscribe) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), unsubscribeWait)
			defer cancel()
			for _, uri := range unsubscribe {
				s.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: uri})
			}
		}
	}
	for _, uri := range subscribe {
		if err := s.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

// dispatch sends a notification of session s to its listeners that want
// it.
func dispatch(s *sdk.ClientSession, method, uri string) {
	hub.Lock()
	var to []*Listener
	if sl := hub.sessions[s]; sl != nil {
		for l := range sl.listeners {
			if l.wants(method, uri) {
				to = append(to, l)
			}
		}
	}
	hub.Unlock()
	for _, l := range to {
		l.Notify(method, uri)
	}
}

// listHandlers sets o's handlers of the notifications that outlive a
// request; a tools list change also runs t's ToolsChanged.
func (t *Table) listHandlers(o *sdk.ClientOptions) {
	o.ToolListChangedHandler = func(_ context.Context, r *sdk.ToolListChangedRequest) {
		t.mu.Lock()
		changed := t.toolsChanged
		t.mu.Unlock()
		if changed != nil {
			changed()
		}
		dispatch(r.Session, ToolsListChanged, "")
	}
	o.PromptListChangedHandler = func(_ context.Context, r *sdk.PromptListChangedRequest) {
		dispatch(r.Session, PromptsListChanged, "")
	}
	o.ResourceListChangedHandler = func(_ context.Context, r *sdk.ResourceListChangedRequest) {
		dispatch(r.Session, ResourcesListChanged, "")
	}
	o.ResourceUpdatedHandler = func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
		if r.Params != nil {
			dispatch(r.Session, ResourceUpdated, r.Params.URI)
		}
	}
}

// OnToolsChanged sets what runs when the proxied server says its tools
// changed (the holder of a cached tool list drops it).
func (t *Table) OnToolsChanged(fn func()) {
	t.mu.Lock()
	t.toolsChanged = fn
	t.mu.Unlock()
}
