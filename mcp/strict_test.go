package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"golang.org/x/sys/unix"
)

// strictRef is the reference strict parser: encoding/json's token stream,
// exact member names, no repeats.
func strictRef(body []byte) (method, name string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return "", "", false
	}
	if !uniqueKeys(body) {
		return "", "", false
	}
	if err := json.Unmarshal(top["method"], &method); err != nil {
		return "", "", false
	}
	if p := top["params"]; len(p) > 0 && p[0] == '{' {
		var params map[string]json.RawMessage
		if json.Unmarshal(p, &params) == nil && uniqueKeys(p) {
			json.Unmarshal(params["name"], &name)
		}
	}
	return method, name, true
}

// uniqueKeys reports whether the top-level object of b repeats no member.
func uniqueKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		k, _ := t.(string)
		if seen[k] {
			return false
		}
		seen[k] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return true
}

var strictSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"widgets","arguments":{"action":"get"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"METHOD":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"method\u0000":"tools/call","method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","Name":"b"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","argument\u017f":{"action":"x"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"action":"get","action":"delete"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"\u006eame":"a"}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
	`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolversion":"2025-06-18"},"name":"a"}}`,
}

func TestStrictEnvelope(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body   string
		reject bool
		method string
	}{
		{strictSeeds[0], false, "tools/call"},
		{strictSeeds[1], true, ""},
		{strictSeeds[2], true, ""},
		{strictSeeds[3], true, ""},
		{strictSeeds[4], true, ""},
		{strictSeeds[5], true, ""},
		{strictSeeds[6], true, ""},
		{strictSeeds[7], true, ""},
		{strictSeeds[8], true, ""},
		{strictSeeds[9], false, "tools/call"},
		{strictSeeds[11], true, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","foo":1}}`, false, "tools/call"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"Action":"x","action":"y"}}}`, false, "tools/call"},
	} {
		msgs, _, err := parseMessages([]byte(tc.body))
		if tc.reject {
			if err == nil {
				t.Errorf("%s: accepted, want refused", tc.body)
			}
			continue
		}
		if err != nil || len(msgs) != 1 || msgs[0].method != tc.method {
			t.Errorf("%s: %v %+v", tc.body, err, msgs)
		}
	}
}

// FuzzStrictEnvelope: whatever the strict splitter accepts, the reference
// strict parser and the SDK's own decoder read as the same method and tool
// name; whatever selects a different method or tool in them is refused.
func FuzzStrictEnvelope(f *testing.F) {
	for _, s := range strictSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		body = bytes.TrimSpace(body)
		if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
			return
		}
		msgs, _, err := parseMessages(body)
		if err != nil {
			return
		}
		env := msgs[0]
		if !env.hasMethod {
			return
		}
		method, name, ok := strictRef(body)
		if !ok || method != env.method {
			t.Fatalf("accepted %q as method %q; strict parser: %q ok=%v", body, env.method, method, ok)
		}
		msg, err := jsonrpc.DecodeMessage(body)
		if err != nil {
			return // the SDK refuses it: nothing is selected
		}
		req, isReq := msg.(*jsonrpc.Request)
		if !isReq {
			return
		}
		if req.Method != env.method {
			t.Fatalf("%q: the SDK reads method %q, we read %q", body, req.Method, env.method)
		}
		if len(req.Params) > 0 && req.Params[0] == '{' {
			var p struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(req.Params, &p) == nil && p.Name != name {
				t.Fatalf("%q: a folding decoder reads tool %q, the strict parser %q", body, p.Name, name)
			}
		}
	})
}

// FuzzScanObject: the object scanner finds the members encoding/json
// finds, in any valid object.
func FuzzScanObject(f *testing.F) {
	for _, s := range strictSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"a":[1,{"b":"}"}],"c":"\"\\","d":{}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		body = bytes.TrimSpace(body)
		if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
			return
		}
		members, ok := scanObject(nil, body)
		if !ok {
			t.Fatalf("valid object %q not scanned", body)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		for _, mb := range members {
			if !json.Valid(mb.raw) {
				t.Fatalf("%q: member %q has invalid value %q", body, mb.key, mb.raw)
			}
			if _, ok := m[mb.key]; !ok && !strings.ContainsRune(mb.key, '\uFFFD') {
				t.Fatalf("%q: member %q unknown to encoding/json", body, mb.key)
			}
		}
		if len(members) < len(m) {
			t.Fatalf("%q: scanned %d members, encoding/json %d", body, len(members), len(m))
		}
	})
}

// argumentsBody is a tools/call whose arguments have n distinct members.
func argumentsBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"widgets","arguments":{"action":"get"`)
	for i := range n {
		fmt.Fprintf(&b, `,"k%d":%d`, i, i)
	}
	b.WriteString(`}}}`)
	return b.Bytes()
}

// TestStrictCheckIsLinear: checking 8 times as many argument members takes
// about 8 times as long, not 64 (80k members once cost 11.7 s of CPU). It
// runs alone (no t.Parallel) and keeps the best of 5 runs of each size.
func TestStrictCheckIsLinear(t *testing.T) {
	// The two sizes are 16 apart, so linear is a ratio of 16 and
	// quadratic 256: the bound (64) leaves 4x and still fails a quadratic
	// check by 4x. The cost is the CPU time of the thread doing the check
	// (best of several runs, with the collector off), not wall time: on a
	// loaded machine a long run is preempted many times and a short one
	// rarely, which skews a wall-time ratio by the load, not the code.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	threadCPU := func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ts.Nano())
	}
	bodies := [2][]byte{argumentsBody(10_000), argumentsBody(160_000)}
	best := [2]time.Duration{math.MaxInt64, math.MaxInt64}
	for range 5 {
		for i, body := range bodies {
			start := threadCPU()
			if _, _, err := parseMessages(body); err != nil {
				t.Fatal(err)
			}
			best[i] = min(best[i], threadCPU()-start)
		}
	}
	if ratio := float64(best[1]) / float64(max(best[0], time.Microsecond)); ratio > 64 {
		t.Errorf("10k members: %v, 160k members: %v of CPU: ratio %.1f, want about 16 (linear)", best[0], best[1], ratio)
	} else {
		t.Logf("10k members: %v, 160k members: %v of CPU: ratio %.1f", best[0], best[1], ratio)
	}
	body := argumentsBody(40_000)
	dup := append(bytes.TrimSuffix(body, []byte(`}}}`)), `,"k39999":0}}}`...)
	if _, _, err := parseMessages(dup); err == nil || !strings.Contains(err.Error(), `"k39999"`) {
		t.Errorf("a member repeated at the end of 40k was not refused: %v", err)
	}
}

// BenchmarkStrictArguments shows the cost per member of the strict check
// as arguments grow (it must stay flat):
//
//	go test -run '^$' -bench StrictArguments ./mcp
func BenchmarkStrictArguments(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 80_000} {
		body := argumentsBody(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, _, err := parseMessages(body); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/member")
		})
	}
}

// FuzzDecodeArgs: the arguments decoder (the scanner, then encoding/json
// for non-string values) gives what encoding/json gives for the whole
// object, in any valid object, and refuses what it refuses.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range strictSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{"action":"get","id":"w1"}`, `{"a":"x","a":"y"}`, `{"a":"\u00e9\n\"","b":1.50,"c":null,"d":[1,"2"],"e":{"f":true}}`,
		`{"big":12345678901234567890,"neg":-0,"exp":1e400}`, `{"s":"\ud800"}`, "\n {\"a\" : \"x\" ,\"b\":\"\",\"c\":\"y\\\"\"} ", `{}`, `null`, ` `, `[1]`, `"x"`, `{"a":}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := decodeArgs(raw)
		want := map[string]any{}
		trimmed := bytes.TrimSpace(raw)
		var werr error
		if len(trimmed) != 0 && string(trimmed) != "null" {
			werr = json.Unmarshal(trimmed, &want)
			if werr == nil && want == nil {
				werr = fmt.Errorf("null object")
			}
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: decodeArgs error %v, encoding/json %v", raw, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeArgs %#v, encoding/json %#v", raw, got, want)
		}
	})
}
