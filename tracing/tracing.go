// Package tracing is the OpenTelemetry tracing of agent calls, off unless
// an OTLP/HTTP endpoint is configured (--otlp-endpoint): a span per agent
// request ("call", the total) parented on the caller's W3C traceparent,
// and a child span per step the gateway times (authenticate, resolve,
// credentials, upstream). A nil *Tracer is tracing off: every method
// returns at once, and the agent path allocates nothing for it.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ResponseHeader carries the trace id and the call span's id on the
// answer of a traced request (W3C Trace Context Level 2 "traceresponse":
// version-traceid-spanid-flags), so that a caller can quote it, and so that
// the agent path's log lines, which read their request's response headers
// as they do for the request id, carry the trace id.
const ResponseHeader = "Traceresponse"

// Tracer exports the spans of agent calls to an OTLP/HTTP collector.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// New returns a tracer exporting to endpoint, the full URL of an OTLP/HTTP
// traces receiver (http://collector:4318/v1/traces; an empty path is
// /v1/traces), or nil when endpoint is empty. version is the service
// version in the spans' resource. ratio (0 to 1) is the share of calls
// sampled among those without a caller's traceparent, chosen by trace id
// (the same trace id gets the same decision on every replica); a call
// with a caller's traceparent follows its sampled flag (parent-based).
func New(endpoint, version string, ratio float64) (*Tracer, error) {
	if endpoint == "" {
		return nil, nil
	}
	if !(ratio >= 0 && ratio <= 1) {
		return nil, fmt.Errorf("the trace sample ratio must be between 0 and 1, not %g", ratio)
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("the OTLP endpoint must be an http(s) URL without credentials or query, like http://collector:4318/v1/traces")
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithTimeout(10 * time.Second)}
	if u.Path != "" && u.Path != "/" {
		opts = append(opts, otlptracehttp.WithURLPath(u.Path))
	}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	// New only configures the client: nothing is sent before a span ends.
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("the OTLP exporter: %w", err)
	}
	p := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		// A caller's traceparent decides (sampled or not); a call
		// without one is sampled at ratio (TraceIDRatioBased is
		// AlwaysSample at 1, NeverSample at 0).
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", "switchboard"), attribute.String("service.version", version))),
	)
	return &Tracer{provider: p, tracer: p.Tracer("github.com/switchboardhq/switchboard")}, nil
}

// Shutdown exports the spans not yet sent and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

var w3c propagation.TraceContext

// Middleware traces the requests of the agent path (/workspaces/...):
// each is a "call" span, the child of the caller's traceparent when it
// sent a valid one, whose ids go in the ResponseHeader. Other requests,
// and every request when t is nil, pass through untouched.
func (t *Tracer) Middleware(next http.Handler) http.Handler {
	if t == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/workspaces/") {
			next.ServeHTTP(w, r)
			return
		}
		ctx := w3c.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := t.tracer.Start(ctx, "call", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		defer span.End()
		sc := span.SpanContext()
		w.Header().Set(ResponseHeader, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-"+sc.TraceFlags().String())
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Step records a finished step of the call traced in ctx as a child span
// from start to end, with an error status (the error's code) when code is
// not empty. Nothing is recorded when t is nil or ctx carries no span.
func (t *Tracer) Step(ctx context.Context, name string, start, end time.Time, code string) {
	if t == nil {
		return
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	_, span := t.tracer.Start(ctx, name, trace.WithTimestamp(start))
	if code != "" {
		span.SetStatus(codes.Error, code)
	}
	span.End(trace.WithTimestamp(end))
}

// Upstream starts the span of an upstream request of the call traced in
// ctx (a client span); end ends it with status, the upstream's HTTP status
// (0 when none came), and code, the call's error code ("" on success).
// When propagate is set and the span is valid, header gets its
// traceparent (the upstream's parent is this span); header may be nil
// when propagate is not set. With t nil it returns a no-op end.
func (t *Tracer) Upstream(ctx context.Context, header http.Header, propagate bool) (end func(status int, code string)) {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return noEnd
	}
	ctx, span := t.tracer.Start(ctx, "upstream", trace.WithSpanKind(trace.SpanKindClient))
	if propagate {
		w3c.Inject(ctx, propagation.HeaderCarrier(header))
	}
	return func(status int, code string) {
		if status != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", status))
		}
		if code != "" {
			span.SetStatus(codes.Error, code)
		}
		span.End()
	}
}

func noEnd(int, string) {}

// Outcome sets the outcome code of the call traced in ctx ("ok", or its
// error code) and its connector on the call's span.
func (t *Tracer) Outcome(ctx context.Context, connector, code string) {
	if t == nil {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("switchboard.connector", connector), attribute.String("switchboard.outcome", code))
	if code != "ok" {
		span.SetStatus(codes.Error, code)
	}
}

// TraceID returns the trace id of a ResponseHeader value, "" when there is
// none.
func TraceID(responseHeader string) string {
	if len(responseHeader) < 35 || responseHeader[2] != '-' {
		return ""
	}
	return responseHeader[3:35]
}
