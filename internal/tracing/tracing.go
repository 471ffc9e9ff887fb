// Package tracing builds the OpenTelemetry tracer provider the gateway
// exports request traces through: OTLP over HTTP, configured by the
// standard OTEL_* environment variables, and only when an OTLP endpoint
// is set. Without one the gateway gets no provider and its request path
// skips every tracing call behind one nil check.
package tracing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// Enabled reports whether the environment names an OTLP endpoint for
// traces (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT)
// and has not turned the exporter off (OTEL_TRACES_EXPORTER=none or
// OTEL_SDK_DISABLED=true).
func Enabled(getenv func(string) (string, bool)) bool {
	if v, _ := getenv("OTEL_SDK_DISABLED"); v == "true" {
		return false
	}
	if v, _ := getenv("OTEL_TRACES_EXPORTER"); v == "none" {
		return false
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v, ok := getenv(k); ok && v != "" {
			return true
		}
	}
	return false
}

// New returns a tracer provider that batches spans to an OTLP/HTTP
// endpoint. The exporter reads the standard variables itself
// (OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _TIMEOUT, _PROTOCOL …);
// opts add to them (tests pass an endpoint URL). Shut it down to flush.
func New(ctx context.Context, version string, opts ...otlptracehttp.Option) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP/HTTP trace exporter: %w; check OTEL_EXPORTER_OTLP_ENDPOINT", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName("omniroute"), semconv.ServiceVersion(version)))
	if err != nil {
		res = resource.Default()
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)), sdktrace.WithResource(res)), nil
}
