package mcp

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBoundedArray: answers that would take a batch's answer past the
// limit are replaced by a response_too_large error that keeps their id.
func TestBoundedArray(t *testing.T) {
	t.Parallel()
	big := func(id string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"text":"` + strings.Repeat("x", 1000) + `"}}`)
	}
	out := boundedArray([][]byte{big("1"), big(`"two"`), []byte(`{"jsonrpc":"2.0","id":3,"result":{}}`)}, 1500)
	var got []struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(got) != 3 || len(out) > 1500 {
		t.Fatalf("%d answers, %d bytes: %s", len(got), len(out), out)
	}
	if string(got[0].ID) != "1" || got[0].Error != nil {
		t.Errorf("first answer = %+v, want kept", got[0])
	}
	if string(got[1].ID) != `"two"` || got[1].Error == nil || got[1].Error.Code != -32603 ||
		!strings.HasPrefix(got[1].Error.Message, "response_too_large: ") {
		t.Errorf("second answer = %s, want response_too_large with its id", out)
	}
	if string(got[2].ID) != "3" || got[2].Error != nil {
		t.Errorf("third answer = %+v, want kept (it fits)", got[2])
	}
}
