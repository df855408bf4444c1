package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard"
)

// FuzzAppendRecord holds appendRecord to encoding/json: whatever it
// writes is byte for byte what json.Encoder.Encode writes, and it
// declines every entry encoding/json would write otherwise or refuse.
func FuzzAppendRecord(f *testing.F) {
	f.Add("aud_000640f2a1b2c3d4e5f60718293a4b5c", int64(1764655200123456789), 0, "ten_a", "github", "cal_1", "agent",
		"usr_1", "usr_2", "repositories", "get", "ok", 200, int64(812))
	f.Add("x", int64(0), 3600, "t<", "i&", `c"`, "a\\", "é", "\u2028", "\x7f", "\n", "\xff", -1, int64(-5))
	f.Add("", int64(-62167219200000000), 86400, "", "", "", "", "", "", "", "", "", 0, int64(0))
	f.Add("y", int64(253402300800000000), -3601, "a", "b", "c", "d", "e", "f", "g", "h", "i", 1, int64(1))
	f.Fuzz(func(t *testing.T, id string, unixNano int64, offset int, tenant, instance, caller, agent, actor, subject, tool, action, outcome string, status int, latency int64) {
		at := time.Unix(0, unixNano).In(time.FixedZone("z", offset))
		if unixNano%3 == 0 {
			at = time.Unix(unixNano/7, 0).UTC() // years far outside 0-9999 too
		}
		e := Entry{ID: id, Time: at, Tenant: switchboard.TenantID(tenant), Instance: instance, Caller: caller, Agent: agent,
			Actor: actor, Subject: subject, Tool: tool, Action: action, Outcome: outcome, Status: status, LatencyUs: latency}
		var want bytes.Buffer
		wantErr := json.NewEncoder(&want).Encode(&e)
		prefix := []byte("head")
		got, ok := appendRecord(prefix, &e)
		if !ok {
			if !bytes.Equal(got, prefix) {
				t.Fatalf("declined, but appended %q", got[len(prefix):])
			}
			return
		}
		if wantErr != nil {
			t.Fatalf("wrote %q for an entry encoding/json refuses (%v)", got, wantErr)
		}
		if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want.Bytes()) {
			t.Fatalf("appendRecord wrote\n%q\nencoding/json\n%q", got[len(prefix):], want.Bytes())
		}
	})
}

// TestAppendRecordTakesTheCommonRow: a call's usual row (identifiers,
// UTC time) takes the direct way, not the fallback.
func TestAppendRecordTakesTheCommonRow(t *testing.T) {
	e := Entry{ID: NewID(time.Now()), Time: time.Now().UTC(), Tenant: "ten_x", Instance: "github", Caller: "cal_1",
		Agent: "claude-code/1.0", Actor: "usr_1", Subject: "usr_1", Tool: "repositories", Action: "get", Outcome: "ok",
		Status: 200, LatencyUs: 1234}
	if _, ok := appendRecord(nil, &e); !ok {
		t.Fatal("a plain row was declined")
	}
}
