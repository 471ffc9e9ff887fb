package edge

import (
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/dialect"
)

// The route table. Endpoints is the one list of the gateway's paths:
// the dispatch to handlers, the prefix matching of the path families
// (/api/services/..., /api/keys/..., /dashboard/..., /v1/models/{id}),
// the methods answered 405, the guard class, the README rows that
// document each path and the 404 message's list of inference paths are
// all read from it. TestRouteTableComplete checks every row, and
// TestReadmeMatchesRouteTable checks README.md's tables against it.

// Route is a family of endpoints that share a metrics label and an error
// dialect: the request metrics, the panic guard and the pipeline index
// their per-route state by it.
type Route uint8

// The routes, in table order.
const (
	Other Route = iota
	Chat
	Messages
	Responses
	Embeddings
	Models
	CountTokens
	Health
	Metrics
	Management
	Relay
	Root
	NumRoutes
)

// Dialect is how a route renders the edge's own errors.
type Dialect uint8

const (
	// DialectOpenAI: {"error":{"message","type","param","code"}}.
	DialectOpenAI Dialect = iota
	// DialectAnthropic: {"type":"error","error":{...},"request_id"}, with
	// the Request-Id header the Anthropic SDK reads.
	DialectAnthropic
	// DialectManagement: {"error":{"message","type","code"},"requestId"}.
	DialectManagement
	// DialectCaller: the caller's dialect (OtherFormat): Anthropic's for a
	// path under an Anthropic route or a request with anthropic-version,
	// else OpenAI's. The edge's 404 and 405 follow it; its refusals before
	// routing (browser policy, panics) answer in OpenAI's.
	DialectCaller
)

// RouteSpec is everything the gateway knows about a route.
type RouteSpec struct {
	// Label is the route's value of the metrics' route label.
	Label string
	// Dialect renders the edge's errors on this route.
	Dialect Dialect
	// Surface is the inference API a call on this route speaks (0 for
	// routes that never make a call).
	Surface catalog.Surface
}

var routes = [NumRoutes]RouteSpec{
	Other:       {Label: "other", Dialect: DialectCaller},
	Chat:        {Label: "chat", Dialect: DialectOpenAI, Surface: catalog.Chat},
	Messages:    {Label: "messages", Dialect: DialectAnthropic, Surface: catalog.Messages},
	Responses:   {Label: "responses", Dialect: DialectOpenAI, Surface: catalog.Responses},
	Embeddings:  {Label: "embeddings", Dialect: DialectOpenAI, Surface: catalog.Embeddings},
	Models:      {Label: "models", Dialect: DialectCaller},
	CountTokens: {Label: "count_tokens", Dialect: DialectAnthropic},
	Health:      {Label: "health", Dialect: DialectOpenAI},
	Metrics:     {Label: "metrics", Dialect: DialectOpenAI},
	Management:  {Label: "management", Dialect: DialectManagement},
	Relay:       {Label: "relay", Dialect: DialectOpenAI, Surface: catalog.Chat},
	Root:        {Label: "root", Dialect: DialectOpenAI},
}

// Spec returns the route's row.
func (r Route) Spec() RouteSpec { return routes[r] }

func (r Route) String() string { return routes[r].Label }

// Format is the route's error format for apierror before the caller's
// headers are read (the management dialect has its own writer): the
// format of refusals and of the panic answer.
func (r Route) Format() apierror.Format {
	if routes[r].Dialect == DialectAnthropic {
		return apierror.Anthropic
	}
	return apierror.OpenAI
}

// SurfaceRoute is the route of an inference surface (the relay speaks
// chat too, but is not chat's route).
func SurfaceRoute(s catalog.Surface) Route {
	for r := Route(0); r < NumRoutes; r++ {
		if routes[r].Surface == s && r != Relay {
			return r
		}
	}
	return Other
}

// Methods is a set of HTTP methods. HEAD is answered wherever GET is (the
// edge serves it as GET without the body); a row lists it only where its
// README row does.
type Methods uint8

const (
	GET Methods = 1 << iota
	HEAD
	POST
)

var methodNames = [...]struct {
	m    Methods
	name string
}{{GET, "GET"}, {HEAD, "HEAD"}, {POST, "POST"}}

// Has reports whether the request method m is in the set (HEAD counts as
// GET).
func (s Methods) Has(m []byte) bool {
	switch string(m) {
	case fasthttp.MethodGet, fasthttp.MethodHead:
		return s&GET != 0
	case fasthttp.MethodPost:
		return s&POST != 0
	}
	return false
}

// join names the methods, separated by sep ("GET, HEAD").
func (s Methods) join(sep string) string {
	var b strings.Builder
	for _, n := range methodNames {
		if s&n.m != 0 {
			if b.Len() > 0 {
				b.WriteString(sep)
			}
			b.WriteString(n.name)
		}
	}
	return b.String()
}

// String is the set as an Allow header value ("GET, HEAD").
func (s Methods) String() string { return s.join(", ") }

// ParseMethods reads a list such as "GET, HEAD" (a README Method cell).
func ParseMethods(list string) (Methods, bool) {
	var s Methods
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		found := false
		for _, n := range methodNames {
			if n.name == f {
				s, found = s|n.m, true
			}
		}
		if !found {
			return 0, false
		}
	}
	return s, s != 0
}

// Guard is who may call an endpoint, from where. The edge applies the
// browser policy to every class (and, to the operator classes, refuses
// Sec-Fetch-Site: cross-site); the peer and key checks of each class run
// in the handler, at the point its room documents (the pipeline
// identifies the caller's key after the body's media type; the operator
// APIs call Access, Management or Local).
type Guard uint8

const (
	// Public: anyone who can reach the port (monitors, GET /).
	Public Guard = iota + 1
	// Caller: a tenant's key, as the pipeline identifies it.
	Caller
	// RelayToken: a configured relay token.
	RelayToken
	// Operator: loopback peers while OMNIROUTE_MANAGEMENT_KEY is unset,
	// else callers with the key (Edge.Management).
	Operator
	// LocalOperator: loopback or private-range peers only (403 LOCAL_ONLY
	// before any key), then the key rules (Edge.Access): routes that start
	// programs or change the config.
	LocalOperator
	// LocalPage: loopback or private-range peers, no key (the dashboard's
	// page and assets, which carry no data; Edge.Local).
	LocalPage
	numGuards
)

// operator reports the guard classes of the operator APIs, which answer
// in the management dialect and refuse a cross-site page.
func (g Guard) operator() bool { return g == Operator || g == LocalOperator || g == LocalPage }

// Handler names the handler an endpoint dispatches to; the gateway
// behind the edge supplies one function per handler (New).
type Handler uint8

const (
	HandleInference Handler = iota
	HandleCountTokens
	HandleRelay
	HandleModels
	HandleHealth
	HandleProbe
	HandleMetrics
	HandleRoot // served by the edge itself
	HandlePreview
	HandleQuota
	HandleRequests
	HandleUsage
	HandleReload
	HandleDashboard
	HandleKeys
	HandleServices
	NumHandlers
)

// DocRow is one row of README.md's endpoint table: its Method cell and
// the path its Path cell starts with (placeholders in braces, the query
// left off).
type DocRow struct {
	Methods string
	Path    string
}

// Endpoint is one row of the route table.
type Endpoint struct {
	// Path selects the endpoint when the request path equals it; with
	// Tree, also every path that starts with Path + "/" (Path + "/"
	// itself too, unless Leaf).
	Path string
	Tree bool
	// Leaf, with Tree: a path under Path must name something after the
	// slash (/v1/models/{id}; /v1/models/ is no endpoint).
	Leaf    bool
	Route   Route
	Handler Handler
	// Methods are the methods the endpoint answers (the union of its doc
	// rows' Method cells).
	Methods Methods
	// OwnMethods: the handler answers a method outside Methods itself,
	// after checks that come first on its route (a draining gateway's
	// 503, the operator APIs' per-path methods); else the edge answers
	// 405 before the handler runs.
	OwnMethods bool
	Guard      Guard
	// Doc are the README endpoint table's rows of this endpoint.
	Doc []DocRow
}

// The paths of the table. The operator APIs (transport/ops) name theirs
// by these constants; the inference routes are the dialect table's
// (internal/dialect), the one place that knows a dialect's paths.
const (
	RootPath              = "/"
	ChatPath              = dialect.RouteChat
	MessagesPath          = dialect.RouteMessages
	ResponsesPath         = dialect.RouteResponses
	EmbeddingsPath        = dialect.RouteEmbeddings
	ModelsPath            = "/v1/models"
	CountTokensPath       = dialect.RouteCountTokens
	HealthPath            = "/api/monitoring/health"
	HealthzPath           = "/healthz"
	ReadyzPath            = "/readyz"
	MetricsPath           = "/metrics"
	RelayPath             = "/api/v1/relay" + dialect.PathChat
	DashboardPath         = "/dashboard"
	DashboardSnapshotPath = "/api/dashboard/snapshot"
	ReloadPath            = "/api/config/reload"
	ServicesPath          = "/api/services"
	EnginesPath           = "/api/engines"
	PreviewPath           = "/api/omniroute/route/preview"
	QuotaPath             = "/api/omniroute/quota"
	KeysPath              = "/api/keys"
	RequestsPath          = "/api/requests"
	UsagePath             = "/api/usage"
)

// Endpoints is the route table, in README order.
var Endpoints = []Endpoint{
	{Path: RootPath, Route: Root, Handler: HandleRoot, Methods: GET | HEAD, Guard: Public, Doc: []DocRow{{"GET, HEAD", "/"}}},
	{Path: ChatPath, Route: Chat, Handler: HandleInference, Methods: POST, OwnMethods: true, Guard: Caller, Doc: []DocRow{{"POST", ChatPath}}},
	{Path: MessagesPath, Route: Messages, Handler: HandleInference, Methods: POST, OwnMethods: true, Guard: Caller, Doc: []DocRow{{"POST", MessagesPath}}},
	{Path: ResponsesPath, Route: Responses, Handler: HandleInference, Methods: POST, OwnMethods: true, Guard: Caller, Doc: []DocRow{{"POST", ResponsesPath}}},
	{Path: EmbeddingsPath, Route: Embeddings, Handler: HandleInference, Methods: POST, OwnMethods: true, Guard: Caller, Doc: []DocRow{{"POST", EmbeddingsPath}}},
	{Path: ModelsPath, Tree: true, Leaf: true, Route: Models, Handler: HandleModels, Methods: GET, Guard: Caller,
		Doc: []DocRow{{"GET", ModelsPath}, {"GET", ModelsPath + "/{id}"}}},
	{Path: CountTokensPath, Route: CountTokens, Handler: HandleCountTokens, Methods: POST, OwnMethods: true, Guard: Caller, Doc: []DocRow{{"POST", CountTokensPath}}},
	// Health answers every method (a monitor's POST included).
	{Path: HealthPath, Route: Health, Handler: HandleHealth, Methods: GET, OwnMethods: true, Guard: Public, Doc: []DocRow{{"GET", HealthPath}}},
	{Path: HealthzPath, Route: Health, Handler: HandleProbe, Methods: GET, Guard: Public, Doc: []DocRow{{"GET", HealthzPath}}},
	{Path: ReadyzPath, Route: Health, Handler: HandleProbe, Methods: GET, Guard: Public, Doc: []DocRow{{"GET", ReadyzPath}}},
	{Path: MetricsPath, Route: Metrics, Handler: HandleMetrics, Methods: GET, Guard: Public, Doc: []DocRow{{"GET", MetricsPath}}},
	{Path: RelayPath, Route: Relay, Handler: HandleRelay, Methods: POST, OwnMethods: true, Guard: RelayToken, Doc: []DocRow{{"POST", RelayPath}}},
	{Path: DashboardPath, Tree: true, Route: Management, Handler: HandleDashboard, Methods: GET, OwnMethods: true, Guard: LocalPage, Doc: []DocRow{{"GET", DashboardPath}}},
	{Path: DashboardSnapshotPath, Route: Management, Handler: HandleDashboard, Methods: GET, OwnMethods: true, Guard: LocalOperator, Doc: []DocRow{{"GET", DashboardSnapshotPath}}},
	{Path: ReloadPath, Route: Management, Handler: HandleReload, Methods: POST, OwnMethods: true, Guard: LocalOperator, Doc: []DocRow{{"POST", ReloadPath}}},
	{Path: ServicesPath, Tree: true, Route: Management, Handler: HandleServices, Methods: GET | POST, OwnMethods: true, Guard: LocalOperator,
		Doc: []DocRow{{"GET", ServicesPath}, {"POST", ServicesPath + "/{tool}/start"}, {"GET", ServicesPath + "/{tool}/status"},
			{"GET", ServicesPath + "/{tool}/logs"}, {"POST", ServicesPath + "/{tool}/auto-start"}}},
	{Path: EnginesPath, Route: Management, Handler: HandleServices, Methods: GET, OwnMethods: true, Guard: LocalOperator, Doc: []DocRow{{"GET", EnginesPath}}},
	{Path: PreviewPath, Route: Management, Handler: HandlePreview, Methods: POST, OwnMethods: true, Guard: Operator, Doc: []DocRow{{"POST", PreviewPath}}},
	{Path: QuotaPath, Route: Management, Handler: HandleQuota, Methods: GET, OwnMethods: true, Guard: Operator, Doc: []DocRow{{"GET", QuotaPath}}},
	{Path: KeysPath, Tree: true, Route: Management, Handler: HandleKeys, Methods: GET | POST, OwnMethods: true, Guard: Operator,
		Doc: []DocRow{{"GET, POST", KeysPath}, {"GET", KeysPath + "/{name}"}, {"POST", KeysPath + "/{name}/policy"},
			{"POST", KeysPath + "/{name}/rotate"}, {"POST", KeysPath + "/{name}/revoke"}}},
	{Path: RequestsPath, Route: Management, Handler: HandleRequests, Methods: GET, OwnMethods: true, Guard: Operator, Doc: []DocRow{{"GET", RequestsPath}}},
	{Path: UsagePath, Route: Management, Handler: HandleUsage, Methods: GET, OwnMethods: true, Guard: Operator, Doc: []DocRow{{"GET", UsagePath}}},
}

// noEndpoint is Find's answer for a path the table does not serve.
const noEndpoint = -1

// exact maps the table's paths to their rows; trees are the rows that
// also serve the paths under theirs. Both are built from Endpoints, so a
// path is listed once.
var exact, trees = func() (map[string]int, []int) {
	m := map[string]int{}
	var t []int
	for i, e := range Endpoints {
		if o, dup := m[e.Path]; dup {
			panic("edge: path " + e.Path + " is in rows " + Endpoints[o].Path + " and " + e.Path)
		}
		m[e.Path] = i
		if e.Tree {
			t = append(t, i)
		}
	}
	return m, t
}()

// Find returns the index in Endpoints of the row that serves path, or -1.
func Find(path []byte) int {
	if i, ok := exact[string(path)]; ok {
		return i
	}
	for _, i := range trees {
		e := &Endpoints[i]
		n := len(e.Path)
		if len(path) > n && path[n] == '/' && string(path[:n]) == e.Path && (!e.Leaf || len(path) > n+1) {
			return i
		}
	}
	return noEndpoint
}

// Of maps a request path to its route (Other when no row serves it).
func Of(path []byte) Route {
	if i := Find(path); i >= 0 {
		return Endpoints[i].Route
	}
	return Other
}

// Is reports whether path is served by handler h (the operator APIs'
// path families: /api/services/..., /api/keys/..., the dashboard).
func Is(path []byte, h Handler) bool {
	i := Find(path)
	return i >= 0 && Endpoints[i].Handler == h
}

// OtherFormat is the error format of a path by the caller's dialect
// (DialectCaller): Anthropic's under the path of an Anthropic route
// (/v1/messages/batches) or when the caller sends anthropic-version (as
// the Anthropic SDK always does), else OpenAI's.
func OtherFormat(path []byte, h *fasthttp.RequestHeader) apierror.Format {
	for _, p := range anthropicPaths {
		if len(path) >= len(p) && string(path[:len(p)]) == p {
			return apierror.Anthropic
		}
	}
	if len(h.Peek(anthropicVersion)) > 0 {
		return apierror.Anthropic
	}
	return apierror.OpenAI
}

// anthropicVersion is the Anthropic dialect's version header, which its
// SDK sends on every request.
var anthropicVersion = dialect.Of(dialect.Messages).VersionHeader

// anthropicPaths are the paths of the Anthropic-dialect routes.
var anthropicPaths = func() []string {
	var out []string
	for _, e := range Endpoints {
		if routes[e.Route].Dialect == DialectAnthropic {
			out = append(out, e.Path)
		}
	}
	return out
}()

// inferencePaths is the 404 answer's list of what the gateway serves: the
// doc paths of the rows a tenant's key calls, in table order.
var inferencePaths = func() string {
	var list []string
	for _, e := range Endpoints {
		if e.Guard == Caller {
			for _, d := range e.Doc {
				list = append(list, d.Path)
			}
		}
	}
	return strings.Join(list[:len(list)-1], ", ") + " and " + list[len(list)-1]
}()
