package registry

import (
	"context"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// hangingUpstream answers /headers with its headers and the first part of
// its body, then hangs, and /silent with nothing at all; it reports each
// request's end (its context canceled: the client closed the connection).
func hangingUpstream(t *testing.T) (*httptest.Server, <-chan string) {
	ended := make(chan string, 16)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/headers" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "100")
			w.Write([]byte(`{"partial":`))
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
			ended <- r.URL.Path
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv, ended
}

// waitEnded waits for hangingUpstream to see the request for path end.
func waitEnded(t *testing.T, ended <-chan string, path string) {
	t.Helper()
	select {
	case got := <-ended:
		if got != path {
			t.Errorf("ended %s, want %s", got, path)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the upstream request was not cancelled", path)
	}
}

// A hung upstream ends with the timeout's typed error at the timeout,
// whether it sends nothing or stops in the middle of its body, and its
// request is cancelled (the connection closed).
func TestDispatcherTimeoutEndsAHungUpstream(t *testing.T) {
	t.Parallel()
	srv, ended := hangingUpstream(t)
	const timeout = 300 * time.Millisecond
	d := &Dispatcher{Client: &http.Client{Timeout: timeout}}
	for _, path := range []string{"/silent", "/headers"} {
		start := time.Now()
		_, err := d.Do(context.Background(), Call{Op: testOp("GET", path, nil, nil), BaseURL: srv.URL})
		took := time.Since(start)
		var ue *UpstreamError
		if !errors.As(err, &ue) || ue.Code != "upstream_unavailable" || !strings.Contains(ue.Message, "did not answer in time") {
			t.Fatalf("%s: err = %v, want the timeout's", path, err)
		}
		if took < timeout || took > timeout+10*time.Second {
			t.Errorf("%s: ended after %v, want the timeout (%v)", path, took, timeout)
		}
		waitEnded(t, ended, path)
	}
}

// A caller that goes away (the agent disconnects: its request's context
// is cancelled) cancels the upstream request at once, long before the
// timeout, with the cancellation's error.
func TestDispatcherCallerCancelEndsTheUpstreamRequest(t *testing.T) {
	t.Parallel()
	srv, ended := hangingUpstream(t)
	d := &Dispatcher{Client: &http.Client{Timeout: time.Minute}}
	for _, path := range []string{"/silent", "/headers"} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		_, err := d.Do(ctx, Call{Op: testOp("GET", path, nil, nil), BaseURL: srv.URL})
		var ue *UpstreamError
		if !errors.As(err, &ue) || ue.Code != "upstream_unavailable" || !strings.Contains(ue.Message, "canceled") {
			t.Fatalf("%s: err = %v, want the cancellation's", path, err)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("%s: ended after %v", path, took)
		}
		waitEnded(t, ended, path)
	}
}

// The deadline set cancels each call at its own deadline (timeouts of
// several lengths, registered in any order), with DeadlineExceeded as the
// cause; a call that ends first is cancelled by its end, never as a
// timeout; the set is empty afterwards.
func TestDeadlinesCancelEachCallAtItsDeadline(t *testing.T) {
	t.Parallel()
	ds := &deadlines{}
	timeouts := []time.Duration{400, 100, 300, 50, 200, 100}
	var wg sync.WaitGroup
	for i, ms := range timeouts {
		timeout := ms * time.Millisecond
		start := time.Now()
		ctx, h := ds.withTimeout(context.Background(), timeout)
		early := i == 2 // ends before its deadline
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer h.end()
			if early {
				time.Sleep(timeout / 4)
				return
			}
			<-ctx.Done()
			took := time.Since(start)
			if cause := context.Cause(ctx); cause != context.DeadlineExceeded {
				t.Errorf("call of %v: cause %v, want DeadlineExceeded", timeout, cause)
			}
			if took < timeout || took > timeout+5*time.Second {
				t.Errorf("call of %v cancelled after %v", timeout, took)
			}
		}()
		if early {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ctx.Done()
				if cause := context.Cause(ctx); cause != context.Canceled {
					t.Errorf("a call that ended: cause %v, want Canceled", cause)
				}
			}()
		}
	}
	wg.Wait()
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if len(ds.calls) != 0 {
		t.Errorf("%d calls left in the set", len(ds.calls))
	}
}

// The transport's ResponseHeaderTimeout is the Dispatcher's to apply
// (roundTripper): an upstream that sends no headers ends at the header
// wait with the error the transport's own timer gives (a client with a
// cookie jar goes through http.Client.Do and the transport's timer); one
// that sends its headers in time has the client's whole Timeout for its
// body; and the client's transport keeps its timer for its other users
// (event streams).
func TestDispatcherHeaderWait(t *testing.T) {
	t.Parallel()
	srv, ended := hangingUpstream(t)
	const headerWait, timeout = 200 * time.Millisecond, 1500 * time.Millisecond
	tr := &http.Transport{ResponseHeaderTimeout: headerWait}
	client := &http.Client{Transport: tr, Timeout: timeout}
	jar, _ := cookiejar.New(nil)
	timed := &Dispatcher{Client: &http.Client{Transport: tr, Timeout: timeout, Jar: jar}}
	d := &Dispatcher{Client: client}
	call := func(d *Dispatcher, path string) (*UpstreamError, time.Duration) {
		start := time.Now()
		_, err := d.Do(context.Background(), Call{Op: testOp("GET", path, nil, nil), BaseURL: srv.URL})
		took := time.Since(start)
		var ue *UpstreamError
		if !errors.As(err, &ue) {
			t.Fatalf("%s: err = %v", path, err)
		}
		waitEnded(t, ended, path)
		return ue, took
	}

	got, took := call(d, "/silent")
	want, _ := call(timed, "/silent")
	if *got != *want || !strings.Contains(got.Message, "did not answer in time") {
		t.Errorf("no headers: %+v, the transport's timer gives %+v", got, want)
	}
	if took < headerWait || took >= timeout {
		t.Errorf("no headers: ended after %v, want the header wait (%v)", took, headerWait)
	}

	got, took = call(d, "/headers")
	if !strings.Contains(got.Message, "did not answer in time") {
		t.Errorf("hung body: %+v", got)
	}
	if took < timeout {
		t.Errorf("hung body: ended after %v, before the client's Timeout (%v): the header wait was applied to the body", took, timeout)
	}

	if tr.ResponseHeaderTimeout != headerWait {
		t.Fatalf("the client's transport lost its header timeout: %v", tr.ResponseHeaderTimeout)
	}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/silent")
	if err == nil {
		resp.Body.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "timeout awaiting response headers") {
		t.Errorf("the client's own requests: %v, want the transport's header timeout", err)
	}
	waitEnded(t, ended, "/silent")
}
