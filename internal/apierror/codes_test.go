package apierror

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/testutil/gosource"
)

var codeName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestCodeTableComplete: every row has its code, status, type and
// message; codes are unique and snake_case; a row's type is one of the
// OpenAI vocabulary the gateway uses.
func TestCodeTableComplete(t *testing.T) {
	types := []string{"invalid_request_error", "authentication_error", "permission_error", "not_found_error",
		"rate_limit_error", "server_error", "insufficient_quota", "payload_too_large"}
	seen := map[string]Code{}
	for _, c := range Codes() {
		d := c.Def()
		if d.Code == "" || d.Status < 400 || d.Status > 599 || d.Type == "" || d.Message == "" {
			t.Errorf("code %d is incomplete: %+v", c, d)
		}
		if !codeName.MatchString(d.Code) {
			t.Errorf("code %q is not snake_case", d.Code)
		}
		if !slices.Contains(types, d.Type) {
			t.Errorf("code %q: type %q is not one the gateway uses", d.Code, d.Type)
		}
		if o, dup := seen[d.Code]; dup {
			t.Errorf("codes %d and %d are both %q", o, c, d.Code)
		}
		seen[d.Code] = c
		if c.String() != d.Code || c.Status() != d.Status {
			t.Errorf("code %q: accessors disagree with the row", d.Code)
		}
		e := New(c)
		if e.Status != d.Status || e.Type != d.Type || e.Code != d.Code || e.Message != d.Message {
			t.Errorf("New(%s) = %+v, not its row", d.Code, e)
		}
	}
	if len(Codes()) != int(numCodes)-1 {
		t.Errorf("Codes lists %d codes, the table has %d", len(Codes()), numCodes-1)
	}
}

// TestTemplates: the messages built from templates are, byte for byte,
// those the construction sites wrote by hand before the table.
func TestTemplates(t *testing.T) {
	for _, tc := range []struct {
		e    *Error
		want string
	}{
		{New(CodeModelNotFound, "gpt-x"), `model "gpt-x" is not configured on this gateway; GET /v1/models lists the available models`},
		{New(CodeInvalidStrict, "yes"), `X-OmniRoute-Strict must be true or false, got "yes"`},
		{New(CodeContextLengthExceeded, int64(120000), int64(8192), "m"), `the prompt is about 120000 tokens (estimated), above the 8192-token context window of every target of model "m"; shorten the conversation or use a model with a larger window`},
		{New(CodeToolsNotSupported, "m", "m"), `no target of model "m" takes tools (GET /v1/models/m shows its models); remove tools, or use a model whose targets take them`},
		{New(CodeUnsupportedParameter, "temperature", "not taken"), `temperature: not taken`},
		{New(CodeTargetsExhausted, "m", "30"), `every target of model "m" is rate limited, out of quota or over its token budget (or failed); the earliest recovers in 30s, retry after that (GET /api/omniroute/quota shows why)`},
		{New(CodeTargetsUnavailable, "m", "5"), `every target of model "m" failed at its provider and is cooling down; the earliest is tried again in 5s, retry after that (GET /api/omniroute/quota shows why)`},
		{New(CodeUpstreamUnavailable, "m", "connect"), `no upstream target of model "m" could be reached (connect); retry later`},
		{New(CodeUpstreamTimeout, "m"), `no upstream target of model "m" answered in time; retry later or raise OMNIROUTE_UPSTREAM_TTFB_TIMEOUT_MS`},
		{New(CodeUpstreamBusy, "m"), `every upstream connection of model "m" is busy; retry shortly, or raise OMNIROUTE_UPSTREAM_MAX_CONNS or the connection's max_conns`},
		{New(CodeServiceUnavailable, "m", "vllm", "stopped", "vllm"), `model "m" is served by the supervised service "vllm", which is stopped; the gateway sends prompts only to a service it started itself and that passes its health check. Start it (POST /api/services/vllm/start) or retry once it is back`},
		{New(CodeFusionQuorumNotMet, 1, 3, "f", 2, 0, 2), `only 1 of 3 fusion panel members of model "f" answered (2 failed, 0 skipped); the quorum is 2; retry after the Retry-After delay`},
		{New(CodeRelayTokenExpired, "t1", "2026-01-02T03:04:05Z"), `relay token "t1" expired at 2026-01-02T03:04:05Z; ask the gateway operator for a new one`},
		{New(CodeBifrostUnavailable, "no endpoint"), `OMNIROUTE_RELAY_BACKEND forces bifrost but no endpoint`},
		{New(CodeBadGateway, "boom"), `the Bifrost relay failed: boom; retry, or set OMNIROUTE_RELAY_BACKEND=auto to fall back to the native pipeline`},
		{New(CodeBodyExceedsBudget, int64(16)), `Request body exceeds the chat ingest budget (max 16 MB).`},
		{New(CodeChatHistoryTooLarge, 500), `Chat history exceeds the 500-message limit; compact the conversation and retry.`},
		{New(CodeDuplicateField, "model twice"), `request body is ambiguous: model twice`},
		{New(CodeHostNotAllowed, `"evil.example"`), `the Host header "evil.example" is not a name of this gateway (DNS rebinding defence); call it by IP address or localhost, or add the name to OMNIROUTE_ALLOWED_HOSTS`},
		{New(CodeOriginNotAllowed, "origin x"), `requests from origin x are not allowed (browser request forgery defence); add the origin to OMNIROUTE_CORS_ORIGINS to let a browser app call the gateway`},
		{New(CodeInvalidRequest, "bad"), `cannot build the fusion judge request: bad`},
		{New(CodeInvalidKeyName, "a b"), `name "a b": want 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit`},
		{New(CodeReadOnlyTenant, "cfg"), `"cfg" is a config-file tenant; change it in the config file and reload it (SIGHUP or POST /api/config/reload)`},
		{New(CodeInvalidQuery, "limit", "too large"), `limit: too large`},
		{New(CodeRequestLogUnavailable, "the request log could not be read"), `the request log could not be read; retry`},
		{New(CodeServiceNotFound, "x"), `Service 'x' not found; GET /api/services lists the configured services`},
		{New(CodeNotInstalled, "bifrost", "bifrost"), `bifrost is not installed; install its program, then POST /api/services/bifrost/install`},
		{New(CodeServiceRunning, "bifrost", "running"), `bifrost is running; stop it first`},
		{New(CodeInvalidTail, 1000, 200), `tail must be a whole number from 0 to 1000 (default 200)`},
		{New(CodeInvalidFilter, 200), `filter exceeds maximum length of 200 characters`},
		{New(CodeAdmissionQueueFull, "the queue is full"), `Service temporarily unavailable: the queue is full`},
		{New(CodeInternalError, "100% sure"), `100% sure`},
	} {
		if tc.e.Message != tc.want {
			t.Errorf("%s: message\n %s\nwant\n %s", tc.e.Code, tc.e.Message, tc.want)
		}
	}
}

// TestNoCodeOutsideTable: no Go file of the module (tests aside) writes an
// error code as a string literal: not as the Code of an error value, not
// assigned to a Code field, not as the code argument of an error writer.
// Every code comes from this package's table.
func TestNoCodeOutsideTable(t *testing.T) {
	writers := map[string]int{"WriteManagementError": 4, "WriteManagementFieldError": 4, "WriteError": -1, "WriteFieldError": -1}
	fset, files := gosource.Parse(t, gosource.Options{Skip: func(rel string, dir bool) bool { return dir && rel == "internal/apierror" }})
	var found []string
	for _, cf := range files {
		f := cf.AST
		lit := func(n ast.Expr) bool {
			b, ok := n.(*ast.BasicLit)
			if !ok || b.Kind != token.STRING {
				return false
			}
			s, _ := strconv.Unquote(b.Value)
			return s != ""
		}
		report := func(n ast.Node, what string) {
			found = append(found, fset.Position(n.Pos()).String()+": "+what)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Code" && lit(n.Value) {
					report(n, "Code: literal")
				}
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if s, ok := l.(*ast.SelectorExpr); ok && s.Sel.Name == "Code" && i < len(n.Rhs) && lit(n.Rhs[i]) {
						report(n, ".Code = literal")
					}
				}
			case *ast.CallExpr:
				name := ""
				switch fn := n.Fun.(type) {
				case *ast.Ident:
					name = fn.Name
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				}
				if at, ok := writers[name]; ok {
					for i, a := range n.Args {
						if (at < 0 || i == at) && lit(a) && codeName.MatchString(mustUnquote(a)) {
							report(n, name+" with a literal code")
						}
					}
				}
			}
			return true
		})
	}
	for _, f := range found {
		t.Errorf("%s: use an apierror.Code from the table", f)
	}
}

func mustUnquote(e ast.Expr) string {
	s, _ := strconv.Unquote(e.(*ast.BasicLit).Value)
	return s
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

// TestReadmeListsEveryCode: the README's list of status codes and error
// codes names every code of the table under its status, and nothing else.
func TestReadmeListsEveryCode(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	const header = "| Status | `code` | When |"
	i := strings.Index(readme, "\n"+header)
	if i < 0 {
		t.Fatalf("README.md has no table headed %q", header)
	}
	byCode := map[string]Code{}
	for _, c := range Codes() {
		byCode[c.String()] = c
	}
	listed := map[string]bool{}
	for n, line := range strings.Split(readme[i+1:], "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if n < 2 {
			continue
		}
		cells := strings.SplitN(strings.Trim(line, "|"), "|", 3)
		if len(cells) < 3 {
			t.Errorf("README row without a code: %s", line)
			continue
		}
		var statuses []int
		for _, f := range strings.FieldsFunc(cells[0], func(r rune) bool { return r < '0' || r > '9' }) {
			s, _ := strconv.Atoi(f)
			statuses = append(statuses, s)
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			c, ok := byCode[m[1]]
			if !ok {
				t.Errorf("README.md lists `%s`, which is not in the table of error codes (internal/apierror)", m[1])
				continue
			}
			listed[m[1]] = true
			if !slices.Contains(statuses, c.Status()) {
				t.Errorf("README.md lists `%s` under %v; its status is %d", m[1], statuses, c.Status())
			}
		}
	}
	for _, c := range Codes() {
		if !listed[c.String()] {
			t.Errorf("README.md's list of codes has no row for `%s` (%d)", c, c.Status())
		}
	}
}

// BenchmarkNew: the cost of building a refusal from the table (the
// overload path builds one per shed request).
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = New(CodeChatAdmissionBusy, "Chat admission capacity is temporarily unavailable. Retry shortly.").WithReason("queue_timeout").Retry(2)
	}
}
