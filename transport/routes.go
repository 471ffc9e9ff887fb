package transport

import (
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/transport/ops"
)

// route is an index into the route table.
type route uint8

// The routes, in table order.
const (
	routeOther route = iota
	routeChat
	routeMessages
	routeResponses
	routeEmbeddings
	routeModels
	routeCountTokens
	routeHealth
	routeMetrics
	routeManagement
	routeRelay
	routeRoot
	numRoutes
)

// dialect is how a route renders the gateway's own errors.
type dialect uint8

const (
	// dialectOpenAI: {"error":{"message","type","param","code"}}.
	dialectOpenAI dialect = iota
	// dialectAnthropic: {"type":"error","error":{...},"request_id"}.
	dialectAnthropic
	// dialectManagement: {"error":{"message","type","code"},"requestId"}.
	dialectManagement
)

// routeSpec is everything the gateway knows about one route. It is the
// one list of routes: request metrics, error rendering and the panic
// guard all read it, and every per-route metric is created for every
// entry (routeSeries), so a route cannot be half registered: a route
// added here has all of its handles, and a route not added here has no
// index to be used with. TestRouteTableComplete checks the entries.
type routeSpec struct {
	// label is the route's value of the metrics' route label.
	label string
	// paths are the exact request paths that select the route (none for
	// the fallback and for routes chosen by prefix or by another route).
	paths []string
	// prefix, when set, selects the route for every path under it
	// ("/v1/models/" + id).
	prefix string
	// dialect renders the gateway's errors on this route.
	dialect dialect
	// surface is the inference API a call on this route speaks (0 for
	// routes that never make a call).
	surface catalog.Surface
}

var routes = [numRoutes]routeSpec{
	routeOther:       {label: "other", dialect: dialectOpenAI},
	routeChat:        {label: "chat", paths: []string{"/v1/chat/completions"}, dialect: dialectOpenAI, surface: catalog.Chat},
	routeMessages:    {label: "messages", paths: []string{"/v1/messages"}, dialect: dialectAnthropic, surface: catalog.Messages},
	routeResponses:   {label: "responses", paths: []string{"/v1/responses"}, dialect: dialectOpenAI, surface: catalog.Responses},
	routeEmbeddings:  {label: "embeddings", paths: []string{"/v1/embeddings"}, dialect: dialectOpenAI, surface: catalog.Embeddings},
	routeModels:      {label: "models", paths: []string{"/v1/models"}, prefix: "/v1/models/", dialect: dialectOpenAI},
	routeCountTokens: {label: "count_tokens", paths: []string{countTokensPath}, dialect: dialectAnthropic},
	routeHealth:      {label: "health", paths: []string{"/api/monitoring/health", healthzPath, readyzPath}, dialect: dialectOpenAI},
	routeMetrics:     {label: "metrics", paths: []string{"/metrics"}, dialect: dialectOpenAI},
	routeManagement:  {label: "management", paths: []string{ops.PreviewPath, ops.QuotaPath, ops.KeysPath, ops.RequestsPath, ops.UsagePath, ops.ReloadPath}, dialect: dialectManagement},
	routeRelay:       {label: "relay", paths: []string{"/api/v1/relay/chat/completions"}, dialect: dialectOpenAI, surface: catalog.Chat},
	routeRoot:        {label: "root", paths: []string{"/"}, dialect: dialectOpenAI},
}

// routeByPath maps the table's exact paths to their routes: built from the
// table, so a path is listed once.
var routeByPath = func() map[string]route {
	m := map[string]route{}
	for r := route(0); r < numRoutes; r++ {
		for _, p := range routes[r].paths {
			if o, dup := m[p]; dup {
				panic("transport: path " + p + " is in routes " + routes[o].label + " and " + routes[r].label)
			}
			m[p] = r
		}
	}
	return m
}()

// routeOf maps a request path to its route: the exact paths of the table,
// then the operator APIs' prefixes (/api/services/, /api/keys/,
// /dashboard/), else routeOther.
func routeOf(path []byte) route {
	if r, ok := routeByPath[string(path)]; ok {
		return r
	}
	if ops.IsServicesPath(path) || ops.IsKeysPath(path) || ops.IsDashboardPath(path) {
		return routeManagement
	}
	for r := route(0); r < numRoutes; r++ {
		if p := routes[r].prefix; p != "" && len(path) > len(p) && string(path[:len(p)]) == p {
			return r
		}
	}
	return routeOther
}

// anthropicPrefix is the path prefix of the Anthropic dialect's routes: an
// unknown path under it (/v1/messages/batches) answers in that dialect.
const anthropicPrefix = "/v1/messages"

// otherFormat is the error format of a path no route serves: Anthropic's
// under /v1/messages or when the caller sends anthropic-version (as the
// Anthropic SDK always does), else OpenAI's.
func otherFormat(path []byte, h *fasthttp.RequestHeader) apierror.Format {
	if (len(path) >= len(anthropicPrefix) && string(path[:len(anthropicPrefix)]) == anthropicPrefix) ||
		len(h.Peek("Anthropic-Version")) > 0 {
		return apierror.Anthropic
	}
	return apierror.OpenAI
}

// setAnthropicRequestID adds request-id, where the Anthropic SDK reads a
// response's request id, beside X-Request-Id on Anthropic-dialect answers.
func setAnthropicRequestID(h *fasthttp.ResponseHeader, f apierror.Format, rid []byte) {
	if f == apierror.Anthropic {
		h.SetBytesV("Request-Id", rid)
	}
}

// surfaceRoute is the route of an inference surface.
func surfaceRoute(s catalog.Surface) route {
	for r := route(0); r < numRoutes; r++ {
		if routes[r].surface == s && r != routeRelay {
			return r
		}
	}
	return routeOther
}

// format is the route's error format for apierror (the management dialect
// has its own writer).
func (r route) format() apierror.Format {
	if routes[r].dialect == dialectAnthropic {
		return apierror.Anthropic
	}
	return apierror.OpenAI
}

func (r route) String() string { return routes[r].label }
