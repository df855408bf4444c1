package mcp

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/switchboardhq/switchboard/registry"
)

// resultSeeds are upstream bodies for FuzzAppendSuccess and
// TestAppendSuccess: objects out of order, repeated names, every kind of
// number and string escape encoding/json treats specially.
var resultSeeds = []string{
	`{"id":"w1","name":"Widget"}`,
	`{"b":1,"a":"<x>&","c":[1,2.50,{"z":null,"y":true}]}`,
	`{"a":1,"a":2,"b":{"a":{"x":1},"a":[3]}}`,
	`[1,"two",{"three":3}]`,
	`"text"`, `12`, `-0`, `0`, `true`, `null`,
	`{"n":[1e21,1e20,1e-7,0.000001,123456789012345678,1.0,-1.5e3,1E2,0.1,100000000000000000000]}`,
	`{"big":1e400}`,
	`{"s":"\u00e9\n\t\"\\\/\u0001\b\f\r\u2028\u2029 \ud800 x"}`,
	"{\"raw\":\"\u2028 \u2029 é 日本\"}",
	`{"k\u0041":1}`,
	` {"spaced" : [ 1 , 2 ] , "e" : { } , "f" : [ ] } `,
	`not json`, ``, `{"a":`, "{\"bad\":\"\xff\"}",
	`{"é":1,"e":2,"E":3,"<":4}`,
	`{"m":{"k16":1,"k15":1,"k14":1,"k13":1,"k12":1,"k11":1,"k10":1,"k09":1,"k08":1,"k07":1,"k06":1,"k05":1,"k04":1,"k03":1,"k02":1,"k01":1,"k00":1,"k05":2}}`,
}

// checkAppendSuccess requires appendSuccess to write what the SDK's
// marshaller writes for successResult, or to decline.
func checkAppendSuccess(t *testing.T, body []byte, contentType string) bool {
	resp := &registry.Response{Status: 200, Body: body, ContentType: contentType}
	prefix := []byte("prefix")
	got, ok := appendSuccess(prefix, resp)
	if !bytes.HasPrefix(got, []byte("prefix")) {
		t.Fatalf("%q: the buffer's content was lost: %q", body, got)
	}
	if !ok {
		if len(got) != len(prefix) {
			t.Fatalf("%q: declined but wrote %q", body, got)
		}
		return false
	}
	for _, hasSchema := range []bool{false, true} {
		want, err := json.Marshal(successResult(resp, hasSchema))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("%q (schema %v):\ngot  %s\nwant %s", body, hasSchema, got[len(prefix):], want)
		}
	}
	return true
}

func TestAppendSuccess(t *testing.T) {
	rendered := 0
	for _, s := range resultSeeds {
		for _, ct := range []string{"application/json", "", "text/plain", "image/png"} {
			if checkAppendSuccess(t, []byte(s), ct) {
				rendered++
			}
		}
	}
	// Most seeds are rendered, not declined: the test compares something.
	if rendered < 3*16 {
		t.Errorf("only %d of %d answers rendered", rendered, 4*len(resultSeeds))
	}
	for _, s := range []string{`not json`, ``, `{"big":1e400}`, `{"k\u0041":1}`, "{\"bad\":\"\xff\"}"} {
		if _, ok := appendSuccess(nil, &registry.Response{Body: []byte(s)}); ok {
			t.Errorf("%q rendered; it must be left to successResult", s)
		}
	}
}

// FuzzAppendSuccess: for any body, appendSuccess writes exactly what the
// SDK's marshaller writes for successResult, or declines.
func FuzzAppendSuccess(f *testing.F) {
	for _, s := range append(resultSeeds, strictSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAppendSuccess(t, body, "application/json")
	})
}

func TestAppendSuccessAllocations(t *testing.T) {
	resp := &registry.Response{Status: 200, ContentType: "application/json",
		Body: []byte(`{"name":"Widget","id":"w1","price":12.5,"tags":["a","b"],"owner":{"login":"x","id":7}}`)}
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf, _ = appendSuccess(buf[:0], resp) }); n != 0 {
		t.Errorf("appendSuccess allocates %v times per answer; want 0", n)
	}
}
