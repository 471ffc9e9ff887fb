package dialect

import (
	"go/ast"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/testutil/gosource"
)

// readers are the module's directories that read or write the dialects'
// wire form themselves and so may spell the table's literals: the table,
// the translators (which parse and write every event of the dialects), the
// mock provider (the providers' side of the wire, which the gateway's
// tests talk to) and the benchmark harness (its own mock upstreams and
// reference proxies, outside the product).
var readers = []string{"internal/dialect", "internal/translate", "internal/mockprovider", "bench"}

// literalExempt are single files that must spell one of the literals for
// a reason other than speaking the dialect, each with that reason.
var literalExempt = map[string]string{
	// The redaction patterns name every credential header, whatever the
	// dialect, to find keys in any text (a log line, an error body).
	"internal/sanitize/sanitize.go": "credential names in the redaction pattern",
	// The error table's message tells a caller which headers carry a key;
	// internal/dialect imports internal/apierror, so it cannot ask.
	"internal/apierror/codes.go": "the missing-key message names the headers",
}

// tableLiterals are what only the table may know: every dialect's paths
// and routes, its version and beta headers, the key-carrying auth headers,
// its terminal events and the done marker. Headers are compared without
// case (an HTTP header name has none).
func tableLiterals() (exact, fold []string) {
	for _, id := range All {
		d := Of(id)
		exact = append(exact, d.Route, d.CountTokensRoute, d.Path, d.CountTokensPath)
		exact = append(exact, d.Terminal...)
		fold = append(fold, d.VersionHeader, d.BetaHeader)
	}
	exact = append(exact, string(doneData))
	fold = append(fold, AuthHeader(AuthXAPIKey), AuthHeader(AuthGoogAPIKey))
	return exact, fold
}

// TestNoDialectLiteralOutsideTable: no non-test Go file of the module
// outside the dialects' readers spells a path, a version, beta or auth
// header, a terminal event or the done marker of a dialect in a string
// literal; it reads the table instead (Of(id).Route, .VersionHeader,
// .IsTerminal, AuthHeader, DoneFrame...), so a dialect changes in one
// place. Comments may name them.
func TestNoDialectLiteralOutsideTable(t *testing.T) {
	for _, f := range dialectLiteralsIn(t) {
		t.Errorf("%s: spells the dialect table's %q; read it from internal/dialect instead", f.where, f.lit)
	}
}

type literalHit struct{ where, lit string }

func dialectLiteralsIn(t *testing.T) []literalHit {
	t.Helper()
	exact, fold := tableLiterals()
	var hits []literalHit
	fset, files := gosource.Parse(t, gosource.Options{Skip: func(rel string, dir bool) bool {
		if dir {
			return slices.Contains(readers, rel)
		}
		return literalExempt[rel] != ""
	}})
	for _, f := range files {
		file := f.AST
		ast.Inspect(file, func(n ast.Node) bool {
			if _, ok := n.(*ast.ImportSpec); ok {
				return false // an import path (…/gateway/messages) is no route
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			low := strings.ToLower(v)
			for _, s := range exact {
				if s != "" && strings.Contains(v, s) {
					hits = append(hits, literalHit{fset.Position(lit.Pos()).String(), s})
				}
			}
			for _, s := range fold {
				if s != "" && strings.Contains(low, strings.ToLower(s)) {
					hits = append(hits, literalHit{fset.Position(lit.Pos()).String(), s})
				}
			}
			return true
		})
	}
	return hits
}
