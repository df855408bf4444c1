package registry

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// stringOps are operations whose input schemas are strings only, with a
// parameter in every place and style a string can take, for
// FuzzStringArgs.
func stringOps(t testing.TB) []*Operation {
	ops := []*Operation{
		testOp("GET", "/items/{id}/parts/{part}?beta=true", []Param{
			{Name: "id", In: "path", Required: true, Schema: str()},
			{Name: "part", In: "path", Required: true, Style: "label", Schema: str()},
			{Name: "q", In: "query", Schema: str()},
			{Name: "filter", In: "query", Style: "deepObject", Schema: str()},
			{Name: "doc", In: "query", ContentType: "application/json", Schema: str()},
			{Name: "X-Trace", In: "header", Schema: str()},
			{Name: "session", In: "cookie", Schema: str()},
		}, nil),
		testOp("POST", "/items/{id}", []Param{
			{Name: "id", In: "path", Required: true, Style: "matrix", Schema: str()},
			{Name: "body", Arg: "body_param", In: "query", Schema: str()},
		}, &Body{ContentType: "text/plain", Required: true, Schema: str()}),
		testOp("PUT", "/notes", []Param{{Name: "tag", In: "query", Schema: str()}},
			&Body{ContentType: "application/json", Schema: str()}),
	}
	// The second operation's query parameter is named body: its argument
	// is body_param.
	ops[1].InputSchema.Properties["body_param"] = ops[1].InputSchema.Properties["body"]
	ops[1].InputSchema.Properties["body"] = str()
	for _, op := range ops {
		r, err := op.InputSchema.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		op.resolved, op.stringsOnly = r, stringsOnlySchema(op.InputSchema)
		if !op.stringsOnly {
			t.Fatalf("%s: not strings only", op.Path)
		}
	}
	return ops
}

// FuzzStringArgs holds a call's arguments given as Call.Strings to the
// same arguments given as Call.Args: the same request, or the same error.
// The input is name=value pairs separated by "&" (a later pair of a name
// replaces an earlier one, as in a JSON object).
func FuzzStringArgs(f *testing.F) {
	for _, seed := range []string{
		"id=w1&part=p", "id=w1&part=p&q=a b&filter=x&doc={}&X-Trace=t&session=s", "id=&part=p", "id=.&part=..",
		"id=w1", "part=p", "id=w1&part=p&extra=1", "id=a/b&part=%2F", "id=w1&part=p&X-Trace=a\r\nb", "id=w1&part=p&session=a;b",
		"id=1&body=hello&body_param=x", "id=1", "body=x", "tag=t&body=\"quoted\"", "tag=t", "", "action=get&id=1&part=2",
		"id=w1&part=p&q=1&q=2", "id=é&part=\x00",
	} {
		f.Add(seed)
	}
	ops := stringOps(f)
	f.Fuzz(func(t *testing.T, input string) {
		m := map[string]any{}
		var list []StringArg
		if input != "" {
			for _, pair := range strings.Split(input, "&") {
				name, value, _ := strings.Cut(pair, "=")
				m[name] = value
			}
		}
		for name, value := range m {
			list = append(list, StringArg{Name: name, Value: value.(string)})
		}
		for _, op := range ops {
			c := Call{Op: op, BaseURL: "https://api.example.test/v1/", Credentials: queryApplier{"k"}}
			c.Args = m
			want, werr := BuildRequest(context.Background(), c)
			c.Args, c.Strings = nil, list
			got, gerr := BuildRequest(context.Background(), c)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%s %q: map %v, strings %v", op.Path, input, werr, gerr)
			}
			if werr != nil {
				if werr.Error() != gerr.Error() {
					t.Fatalf("%s %q: map %q, strings %q", op.Path, input, werr, gerr)
				}
				continue
			}
			if want.Method != got.Method || want.URL.String() != got.URL.String() || want.Host != got.Host ||
				!reflect.DeepEqual(want.Header, got.Header) || string(readAll(t, want)) != string(readAll(t, got)) {
				t.Fatalf("%s %q:\nmap     %s %s %v\nstrings %s %s %v", op.Path, input, want.Method, want.URL, want.Header, got.Method, got.URL, got.Header)
			}
		}
	})
}

func readAll(t *testing.T, r *http.Request) []byte {
	if r.Body == nil {
		return nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStringArgsWithoutAMap checks that FuzzStringArgs compares the list's
// own path: valid string arguments are built without the map, anything
// else goes to it.
func TestStringArgsWithoutAMap(t *testing.T) {
	ops := stringOps(t)
	cases := []struct {
		op   int
		args []StringArg
		list bool
	}{
		{0, []StringArg{{"id", "w1"}, {"part", "p"}}, true},
		{0, []StringArg{{"id", "w1"}, {"part", "p"}, {"q", "x"}, {"X-Trace", "t"}, {"session", "s"}}, true},
		{0, []StringArg{{"id", "w1"}}, false},                                // missing required
		{0, []StringArg{{"id", "w1"}, {"part", "p"}, {"other", "x"}}, false}, // unknown
		{1, []StringArg{{"id", "1"}, {"body", "b"}, {"body_param", "q"}}, true},
		{2, nil, true},
	}
	for _, c := range cases {
		if got := ops[c.op].validStrings(c.args); got != c.list {
			t.Errorf("%s %v: validStrings %v, want %v", ops[c.op].Path, c.args, got, c.list)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := BuildRequest(context.Background(), Call{Op: ops[2], BaseURL: "https://api.example.test", Strings: []StringArg{{"tag", "t"}}}); err != nil {
			t.Fatal(err)
		}
	})
	withMap := testing.AllocsPerRun(100, func() {
		if _, err := BuildRequest(context.Background(), Call{Op: ops[2], BaseURL: "https://api.example.test", Args: map[string]any{"tag": "t"}}); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("BuildRequest: %.0f allocations with Strings, %.0f with Args", allocs, withMap)
}
