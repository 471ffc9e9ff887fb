package edge

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docPath is a doc row's path with its placeholders filled in, so that
// it can be routed.
func docPath(p string) string {
	return strings.NewReplacer("{id}", "gpt-x", "{tool}", "svc", "{name}", "agents").Replace(p)
}

// TestRouteTableComplete keeps the route table whole: every route has a
// unique label; every row has a handler, a method set, a guard class and
// doc rows, each doc row's path selects the row and the row's methods are
// exactly its doc rows'; a tree's paths select it; every handler serves
// some row; an operator row answers in the management dialect and only
// an operator row does.
func TestRouteTableComplete(t *testing.T) {
	seen := map[string]Route{}
	for r := Route(0); r < NumRoutes; r++ {
		l := r.Spec().Label
		if l == "" {
			t.Errorf("route %d has no label", r)
		}
		if o, dup := seen[l]; dup {
			t.Errorf("routes %d and %d share the label %q", o, r, l)
		}
		seen[l] = r
	}
	used := map[Handler]bool{}
	for i, e := range Endpoints {
		switch {
		case e.Route <= Other || e.Route >= NumRoutes:
			t.Errorf("%s: route %d", e.Path, e.Route)
		case e.Handler >= NumHandlers:
			t.Errorf("%s: handler %d", e.Path, e.Handler)
		case e.Methods == 0:
			t.Errorf("%s: no methods", e.Path)
		case e.Guard == 0 || e.Guard >= numGuards:
			t.Errorf("%s: guard %d", e.Path, e.Guard)
		case len(e.Doc) == 0:
			t.Errorf("%s: no README row", e.Path)
		case e.Leaf && !e.Tree:
			t.Errorf("%s: Leaf without Tree", e.Path)
		}
		used[e.Handler] = true
		if got := Find([]byte(e.Path)); got != i {
			t.Errorf("%s selects row %d, want %d", e.Path, got, i)
		}
		if e.Tree {
			if got := Find([]byte(e.Path + "/a/b")); got != i {
				t.Errorf("%s/a/b selects row %d, want %d", e.Path, got, i)
			}
			if got := Find([]byte(e.Path + "/")); (got == i) == e.Leaf {
				t.Errorf("%s/ selects row %d (leaf %v)", e.Path, got, e.Leaf)
			}
		}
		var union Methods
		for _, d := range e.Doc {
			m, ok := ParseMethods(d.Methods)
			if !ok {
				t.Errorf("%s: doc row methods %q", e.Path, d.Methods)
			}
			union |= m
			if got := Find([]byte(docPath(d.Path))); got != i {
				t.Errorf("doc path %s selects row %d, want %d (%s)", d.Path, got, i, e.Path)
			}
		}
		if union != e.Methods {
			t.Errorf("%s: methods %s, its doc rows say %s", e.Path, e.Methods, union)
		}
		if e.Guard.operator() != (e.Route.Spec().Dialect == DialectManagement) {
			t.Errorf("%s: guard %d on route %s: operator rows and only they answer in the management dialect", e.Path, e.Guard, e.Route)
		}
	}
	for h := Handler(0); h < NumHandlers; h++ {
		if !used[h] {
			t.Errorf("handler %d serves no row", h)
		}
	}
	for r := Route(1); r < NumRoutes; r++ {
		if !slices.ContainsFunc(Endpoints, func(e Endpoint) bool { return e.Route == r }) {
			t.Errorf("route %s has no row", r)
		}
	}
}

// TestFind: the exact paths, the trees and their edges.
func TestFind(t *testing.T) {
	for path, want := range map[string]Route{
		"/": Root, "": Other, "/v1/chat/completions": Chat, "/v1/chat/completions/": Other, "/v1/chat": Other,
		"/v1/messages": Messages, "/v1/messages/count_tokens": CountTokens, "/v1/messages/batches": Other,
		"/v1/models": Models, "/v1/models/": Other, "/v1/models/gpt-4o": Models, "/v1/models/a/b": Models, "/v1/modelsx": Other,
		"/healthz": Health, "/readyz": Health, "/api/monitoring/health": Health, "/metrics": Metrics,
		"/dashboard": Management, "/dashboard/": Management, "/dashboard/app.js": Management, "/dashboardx": Other,
		"/api/dashboard/snapshot": Management, "/api/services": Management, "/api/services/": Management,
		"/api/services/x/start": Management, "/api/servicesx": Other, "/api/engines": Management, "/api/engines/x": Other,
		"/api/keys": Management, "/api/keys/a/rotate": Management, "/api/keysx": Other,
		"/api/v1/relay/chat/completions": Relay, "/api/v1/relay": Other,
	} {
		if got := Of([]byte(path)); got != want {
			t.Errorf("Of(%q) = %s, want %s", path, got, want)
		}
	}
}

// readmeTable returns the rows (cells) of the README.md table whose header
// row starts with header.
func readmeTable(t *testing.T, readme, header string) [][]string {
	t.Helper()
	i := strings.Index(readme, "\n"+header)
	if i < 0 {
		t.Fatalf("README.md has no table headed %q", header)
	}
	var rows [][]string
	for n, line := range strings.Split(readme[i+1:], "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if n < 2 { // the header and the separator
			continue
		}
		rows = append(rows, splitCells(line))
	}
	return rows
}

// splitCells splits a table row on the pipes that are not escaped (\|).
func splitCells(line string) []string {
	line = strings.Trim(line, "|")
	var cells []string
	start := 0
	for i := 0; i < len(line); i++ {
		if line[i] == '|' && (i == 0 || line[i-1] != '\\') {
			cells = append(cells, strings.TrimSpace(line[start:i]))
			start = i + 1
		}
	}
	return append(cells, strings.TrimSpace(line[start:]))
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

// TestReadmeMatchesRouteTable: README.md's endpoint table has exactly the
// route table's doc rows (method cell and path, the query left off), and
// its security table puts every row's path in the one row of its guard
// class, each class in a row of its own.
func TestReadmeMatchesRouteTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)

	want := map[DocRow]bool{}
	for _, e := range Endpoints {
		for _, d := range e.Doc {
			want[d] = true
		}
	}
	got := map[DocRow]bool{}
	for _, cells := range readmeTable(t, readme, "| Method | Path |") {
		m := codeSpan.FindStringSubmatch(cells[1])
		if m == nil {
			t.Errorf("endpoint row without a path: %v", cells)
			continue
		}
		path, _, _ := strings.Cut(m[1], "?")
		d := DocRow{Methods: cells[0], Path: path}
		got[d] = true
		if !want[d] {
			t.Errorf("README.md documents %s %s, which the route table does not have (edge.Endpoints)", d.Methods, d.Path)
		}
	}
	for d := range want {
		if !got[d] {
			t.Errorf("README.md's endpoint table has no row %q | `%s` (edge.Endpoints)", d.Methods, d.Path)
		}
	}

	// The security table: the row naming each path.
	rowOf := map[string]int{}
	for i, cells := range readmeTable(t, readme, "| Route | Who may call it") {
		for _, m := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
			rowOf[strings.TrimSuffix(m[1], "…")] = i
		}
	}
	guardRow := map[Guard]int{}
	for _, e := range Endpoints {
		row, ok := rowOf[e.Path]
		if !ok {
			t.Errorf("README.md's security table does not name %s", e.Path)
			continue
		}
		if r, seen := guardRow[e.Guard]; seen && r != row {
			t.Errorf("%s has guard class %d, but the security table puts it beside other guard classes' paths (row %d, not %d)", e.Path, e.Guard, row, r)
		}
		guardRow[e.Guard] = row
	}
	for g1, r1 := range guardRow {
		for g2, r2 := range guardRow {
			if g1 != g2 && r1 == r2 {
				t.Errorf("guard classes %d and %d share a row of the security table", g1, g2)
			}
		}
	}
	for p := range rowOf {
		if Find([]byte(p)) < 0 {
			t.Errorf("the security table names %s, which the route table does not serve", p)
		}
	}
}
