package switchboard_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/registry"
)

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 400)
	for _, tc := range []struct {
		name     string
		err      error
		status   int
		code     string
		retry    int64
		wwwAuth  bool
		internal bool
	}{
		{"caller refused", switchboard.E(switchboard.ErrUnauthorized, "unauthorized", "no"), 401, "unauthorized", 0, true, false},
		{"app needs reconnect", switchboard.E(switchboard.ErrUnauthorized, "reconnect_required", "set API_KEY"), 401, "reconnect_required", 0, false, false},
		{"agent", switchboard.E(switchboard.ErrForbidden, "agent_not_allowed", "no"), 403, "agent_not_allowed", 0, false, false},
		{"instance", switchboard.E(switchboard.ErrNotFound, "not_found", "no"), 404, "not_found", 0, false, false},
		{"arguments", switchboard.E(switchboard.ErrInvalid, "invalid_arguments", "%s", long), 400, "invalid_arguments", 0, false, false},
		{"mode", switchboard.E(switchboard.ErrUnavailable, "auth_mode_not_available", "no"), 503, "auth_mode_not_available", 0, false, false},
		{"upstream 401", &registry.UpstreamError{Code: "reconnect_required", Status: 401, Message: "m"}, 401, "reconnect_required", 0, false, false},
		{"upstream 404", &registry.UpstreamError{Code: "not_found", Status: 404, Message: "m"}, 404, "not_found", 0, false, false},
		{"upstream 429", &registry.UpstreamError{Code: "rate_limited", Status: 429, RetryAfter: 1500 * time.Millisecond, Message: "m"}, 429, "rate_limited", 1500, false, false},
		{"upstream 503 with Retry-After", &registry.UpstreamError{Code: "rate_limited", Status: 503, RetryAfter: 2 * time.Second, Message: "m"}, 429, "rate_limited", 2000, false, false},
		{"upstream 500", &registry.UpstreamError{Code: "upstream_unavailable", Status: 500, Message: "m"}, 502, "upstream_unavailable", 0, false, false},
		{"unreachable", &registry.UpstreamError{Code: "upstream_unavailable", Message: "m"}, 502, "upstream_unavailable", 0, false, false},
		{"wrapped", fmt.Errorf("calling: %w", switchboard.E(switchboard.ErrForbidden, "missing_agent_id", "m")), 403, "missing_agent_id", 0, false, false},
		{"internal", fmt.Errorf("driver: password=hunter2 refused"), 500, "internal", 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := switchboard.DetailOf(tc.err)
			p := switchboard.ProblemOf(tc.err)
			if d.Code != tc.code || d.RetryAfterMs != tc.retry || p.Status != tc.status || p.Internal != tc.internal {
				t.Errorf("detail %+v status %d internal %v", d, p.Status, p.Internal)
			}
			if len(d.Message) > switchboard.MaxMessage || strings.Contains(d.Message, "hunter2") {
				t.Errorf("message %q is too long or leaks the cause", d.Message)
			}
			w := httptest.NewRecorder()
			switchboard.WriteError(w, tc.err)
			var body switchboard.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error != d || w.Code != tc.status {
				t.Errorf("written %d %s", w.Code, w.Body)
			}
			if got := w.Header().Get("WWW-Authenticate") == "Bearer"; got != tc.wwwAuth {
				t.Errorf("WWW-Authenticate = %q", w.Header().Get("WWW-Authenticate"))
			}
			if tc.retry > 0 && w.Header().Get("Retry-After") == "" {
				t.Error("no Retry-After header")
			}
			if w.Header().Get("Content-Type") != "application/json" || w.Code == http.StatusOK {
				t.Errorf("headers %v", w.Header())
			}
		})
	}
}

func TestErrorTableRendering(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		err     error
		status  int
		code    string
		message string
		retry   int64
		wwwAuth bool
	}{
		{"store outage", fmt.Errorf("listing: %w", switchboard.E(switchboard.ErrUnavailable, "store_unavailable", "the database is unreachable")),
			503, "store_unavailable", "the database is unreachable", switchboard.StoreRetryAfter.Milliseconds(), false},
		{"store outage with its own delay", &switchboard.Error{Kind: switchboard.ErrUnavailable, Code: "store_unavailable", RetryAfter: 5 * time.Second},
			503, "store_unavailable", "the database is temporarily unavailable; retry later", 5000, false},
		{"bare kind", fmt.Errorf("x: %w", switchboard.ErrUnavailable), 503, "unavailable", "temporarily unavailable", 0, false},
		{"bare not found", switchboard.ErrNotFound, 404, "not_found", "not found", 0, false},
		{"caller credential", switchboard.E(switchboard.ErrUnauthorized, "invalid_credential", "no"), 401, "invalid_credential", "no", 0, true},
		{"upstream 422 passes through", &registry.UpstreamError{Code: "upstream_rejected", Status: 422, Message: "m"}, 422, "upstream_rejected", "m", 0, false},
		{"upstream 3xx", &registry.UpstreamError{Code: "upstream_rejected", Status: 302, Message: "m"}, 502, "upstream_rejected", "m", 0, false},
		{"code outside the table", switchboard.E(switchboard.ErrConflict, "some_new_code", "m"), 409, "some_new_code", "m", 0, false},
		{"no message", &switchboard.Error{Kind: switchboard.ErrNotFound, Code: "route_not_found"}, 404, "route_not_found", "no such route", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := httptest.NewRecorder()
			switchboard.WriteError(w, tc.err)
			var body switchboard.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			want := switchboard.ErrorDetail{Code: tc.code, Message: tc.message, RetryAfterMs: tc.retry}
			if w.Code != tc.status || body.Error != want {
				t.Errorf("got %d %+v, want %d %+v", w.Code, body.Error, tc.status, want)
			}
			if got := w.Header().Get("WWW-Authenticate") == "Bearer"; got != tc.wwwAuth {
				t.Errorf("WWW-Authenticate = %q", w.Header().Get("WWW-Authenticate"))
			}
			if ra := w.Header().Get("Retry-After"); (tc.retry > 0) != (ra != "") {
				t.Errorf("Retry-After = %q", ra)
			}
		})
	}
}

// TestEveryCodeIsInTheTable scans the module's Go source (tests excluded)
// for the error codes it uses: switchboard.E(kind, code, ...) calls (the
// code a literal, a constant, a parameter of a small wrapper such as
// invalid(code, ...), or a function that returns literals), Error and
// UpstreamError literals and .Code assignments. Every code must be in the
// table with the same kind.
func TestEveryCodeIsInTheTable(t *testing.T) {
	t.Parallel()
	uses, problems := scanCodes(t, ".")
	if len(uses) < 50 {
		t.Fatalf("found only %d code uses: the scan is broken", len(uses))
	}
	for _, p := range problems {
		t.Error(p)
	}
	kinds := map[string]error{
		"ErrNotFound": switchboard.ErrNotFound, "ErrInvalid": switchboard.ErrInvalid, "ErrConflict": switchboard.ErrConflict,
		"ErrUnauthorized": switchboard.ErrUnauthorized, "ErrForbidden": switchboard.ErrForbidden, "ErrUnavailable": switchboard.ErrUnavailable,
	}
	for _, u := range uses {
		spec, ok := switchboard.Spec(u.code)
		if !ok {
			t.Errorf("%s: code %q is not in the error table (errorcodes.go)", u.pos, u.code)
			continue
		}
		if u.kind == "" {
			continue
		}
		k, known := kinds[u.kind]
		if !known {
			t.Errorf("%s: code %q used with kind %s, which is not a vocabulary kind", u.pos, u.code, u.kind)
		} else if k != spec.Kind {
			t.Errorf("%s: code %q used with kind %s, but the table says %v", u.pos, u.code, u.kind, spec.Kind)
		}
	}
}

// codeUse is one use of an error code in the source; kind is the name of
// the vocabulary kind it was used with ("" when the use names none).
type codeUse struct {
	pos, code, kind string
}

// scanCodes parses every non-test Go file under root and returns the codes
// used, and the E calls whose code it could not resolve.
func scanCodes(t *testing.T, root string) (uses []codeUse, problems []string) {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{} // by directory
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		pkgs[filepath.Dir(p)] = append(pkgs[filepath.Dir(p)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// String constants, by package name and name; and functions that only
	// return string literals.
	consts := map[string]string{}
	literalFuncs := map[string][]string{}
	for _, files := range pkgs {
		for _, f := range files {
			pkg := f.Name.Name
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.GenDecl:
					if d.Tok != token.CONST {
						continue
					}
					for _, spec := range d.Specs {
						vs := spec.(*ast.ValueSpec)
						for i, n := range vs.Names {
							if i < len(vs.Values) {
								if s, ok := stringLit(vs.Values[i]); ok {
									consts[pkg+"."+n.Name] = s
								}
							}
						}
					}
				case *ast.FuncDecl:
					if lits := returnedLiterals(d); lits != nil {
						literalFuncs[pkg+"."+d.Name.Name] = lits
					}
				}
			}
		}
	}

	// An E call in pkg (inside function fn, if any): the codes it uses, or
	// the wrapper parameter it takes its code from.
	type wrapper struct {
		param  int
		suffix string
		kind   string
	}
	wrappers := map[string]wrapper{}
	type pending struct {
		pos, pkg, kind string
		arg            ast.Expr
	}
	var calls []pending
	for _, files := range pkgs {
		for _, f := range files {
			pkg := f.Name.Name
			for _, decl := range f.Decls {
				fn, _ := decl.(*ast.FuncDecl)
				params := map[string]int{}
				if fn != nil {
					i := 0
					for _, field := range fn.Type.Params.List {
						for _, n := range field.Names {
							params[n.Name] = i
							i++
						}
						if len(field.Names) == 0 {
							i++
						}
					}
				}
				ast.Inspect(decl, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.CallExpr:
						if !isE(n, pkg) || len(n.Args) < 2 {
							return true
						}
						kind := exprName(n.Args[0])
						arg := n.Args[1]
						param, suffix := "", ""
						switch a := arg.(type) {
						case *ast.Ident:
							param = a.Name
						case *ast.BinaryExpr:
							if id, ok := a.X.(*ast.Ident); ok && a.Op == token.ADD {
								if s, ok := stringLit(a.Y); ok {
									param, suffix = id.Name, s
								}
							}
						}
						if i, ok := params[param]; ok && fn != nil {
							wrappers[pkg+"."+fn.Name.Name] = wrapper{param: i, suffix: suffix, kind: kind}
							return true
						}
						calls = append(calls, pending{pos: fset.Position(n.Pos()).String(), pkg: pkg, kind: kind, arg: arg})
					case *ast.CompositeLit:
						if !isErrorType(n.Type, pkg) {
							return true
						}
						for _, el := range n.Elts {
							kv, ok := el.(*ast.KeyValueExpr)
							if !ok {
								continue
							}
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Code" {
								if _, ok := stringLit(kv.Value); ok {
									calls = append(calls, pending{pos: fset.Position(kv.Pos()).String(), pkg: pkg, arg: kv.Value})
								}
							}
						}
					case *ast.AssignStmt:
						for i, l := range n.Lhs {
							if s, ok := l.(*ast.SelectorExpr); ok && s.Sel.Name == "Code" && i < len(n.Rhs) {
								if _, ok := stringLit(n.Rhs[i]); ok {
									calls = append(calls, pending{pos: fset.Position(n.Pos()).String(), pkg: pkg, arg: n.Rhs[i]})
								}
							}
						}
					}
					return true
				})
			}
		}
	}

	// Resolve the codes of E calls, then of calls of the wrappers.
	resolve := func(pkg string, e ast.Expr) ([]string, bool) {
		if s, ok := stringLit(e); ok {
			return []string{s}, true
		}
		switch x := e.(type) {
		case *ast.Ident:
			s, ok := consts[pkg+"."+x.Name]
			return []string{s}, ok
		case *ast.SelectorExpr:
			if p, ok := x.X.(*ast.Ident); ok {
				s, ok := consts[p.Name+"."+x.Sel.Name]
				return []string{s}, ok
			}
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok {
				lits, ok := literalFuncs[pkg+"."+id.Name]
				return lits, ok
			}
		}
		return nil, false
	}
	for _, c := range calls {
		codes, ok := resolve(c.pkg, c.arg)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: the error code is not a literal, a constant or a wrapper parameter", c.pos))
			continue
		}
		for _, code := range codes {
			uses = append(uses, codeUse{pos: c.pos, code: code, kind: c.kind})
		}
	}
	for _, files := range pkgs {
		for _, f := range files {
			pkg := f.Name.Name
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				id, ok := call.Fun.(*ast.Ident)
				if !ok {
					return true
				}
				w, ok := wrappers[pkg+"."+id.Name]
				if !ok || w.param >= len(call.Args) {
					return true
				}
				pos := fset.Position(call.Pos()).String()
				codes, ok := resolve(pkg, call.Args[w.param])
				if !ok {
					problems = append(problems, fmt.Sprintf("%s: the error code passed to %s is not a literal or a constant", pos, id.Name))
					return true
				}
				for _, code := range codes {
					uses = append(uses, codeUse{pos: pos, code: code + w.suffix, kind: w.kind})
				}
				return true
			})
		}
	}
	return uses, problems
}

// isE reports whether call is switchboard.E (or E inside the root package).
func isE(call *ast.CallExpr, pkg string) bool {
	switch fn := call.Fun.(type) {
	case *ast.SelectorExpr:
		x, ok := fn.X.(*ast.Ident)
		return ok && x.Name == "switchboard" && fn.Sel.Name == "E"
	case *ast.Ident:
		return pkg == "switchboard" && fn.Name == "E"
	}
	return false
}

// isErrorType reports whether a composite literal's type is
// switchboard.Error or registry.UpstreamError.
func isErrorType(typ ast.Expr, pkg string) bool {
	switch x := typ.(type) {
	case *ast.SelectorExpr:
		p, ok := x.X.(*ast.Ident)
		return ok && (p.Name == "switchboard" && x.Sel.Name == "Error" || p.Name == "registry" && x.Sel.Name == "UpstreamError")
	case *ast.Ident:
		return pkg == "switchboard" && x.Name == "Error" || pkg == "registry" && x.Name == "UpstreamError"
	}
	return false
}

// exprName is the last name of an identifier, selector or pointer to one.
func exprName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.StarExpr:
		return exprName(x.X)
	}
	return ""
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// returnedLiterals returns the string literals fn returns, when it returns
// one string and every return statement is a literal; else nil.
func returnedLiterals(fn *ast.FuncDecl) []string {
	res := fn.Type.Results
	if fn.Body == nil || res == nil || len(res.List) != 1 || exprName(res.List[0].Type) != "string" {
		return nil
	}
	var lits []string
	ok := true
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if _, isLit := n.(*ast.FuncLit); isLit {
			return false
		}
		if r, isRet := n.(*ast.ReturnStmt); isRet {
			if len(r.Results) != 1 {
				ok = false
			} else if s, isStr := stringLit(r.Results[0]); isStr {
				lits = append(lits, s)
			} else {
				ok = false
			}
		}
		return true
	})
	if !ok || len(lits) == 0 {
		return nil
	}
	return lits
}

// TestScanCodes proves the scan sees each form of use, so that
// TestEveryCodeIsInTheTable cannot pass by finding nothing.
func TestScanCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := `package shop

import "github.com/switchboardhq/switchboard"

const codeGone = "shop_gone"

func invalid(code, msg string) error { return switchboard.E(switchboard.ErrInvalid, code, "%s", msg) }

func notFound(what string) error { return switchboard.E(switchboard.ErrNotFound, what+"_missing", "no") }

func name(n int) string {
	if n == 0 {
		return "shop_zero"
	}
	return "shop_other"
}

var dynamic = []string{"shop_dynamic"}

func f(n int) []error {
	return []error{
		switchboard.E(switchboard.ErrConflict, "shop_literal", "x"),
		switchboard.E(switchboard.ErrNotFound, codeGone, "x"),
		invalid("shop_wrapped", "x"),
		notFound("shelf"),
		switchboard.E(switchboard.ErrInvalid, name(n), "x"),
		&switchboard.Error{Kind: switchboard.ErrInvalid, Code: "shop_struct"},
		switchboard.E(switchboard.ErrInvalid, dynamic[0], "x"),
	}
}
`
	if err := os.WriteFile(filepath.Join(dir, "shop.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	uses, problems := scanCodes(t, dir)
	var got []string
	for _, u := range uses {
		got = append(got, u.code+"/"+u.kind)
	}
	slices.Sort(got)
	want := []string{"shelf_missing/ErrNotFound", "shop_gone/ErrNotFound", "shop_literal/ErrConflict", "shop_other/ErrInvalid",
		"shop_struct/", "shop_wrapped/ErrInvalid", "shop_zero/ErrInvalid"}
	if !slices.Equal(got, want) {
		t.Errorf("uses = %v, want %v", got, want)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "shop.go:") {
		t.Errorf("problems = %v, want the call with a variable code", problems)
	}
}
