package audit

import (
	"strconv"
	"time"
)

// appendRecord appends e as the journal's record payload: e's JSON and a
// newline, byte for byte what json.Encoder.Encode writes for it. The
// record's shape is fixed and its values are nearly always identifiers,
// so it is written out directly: encoding/json's reflection was about 5 %
// of the server's CPU under load (bench/overhead -server-profile), a
// third of what the journal cost. ok is false, with nothing appended,
// for an entry this does not write exactly as encoding/json would (a
// string needing an escape, a year outside 0-9999, a zone 24 hours or
// more from UTC): the caller encodes that one with encoding/json. FuzzAppendRecord holds the two together.
func appendRecord(b []byte, e *Entry) (_ []byte, ok bool) {
	if y := e.Time.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := e.Time.Zone(); off <= -24*3600 || off >= 24*3600 {
		return b, false
	}
	vals := [...]string{e.ID, string(e.Tenant), e.Instance, e.Caller, e.Agent, e.Actor, e.Subject, e.Tool, e.Action, e.Outcome}
	for _, v := range vals {
		if !plain(v) {
			return b, false
		}
	}
	b = append(b, `{"id":"`...)
	b = append(b, e.ID...)
	b = append(b, `","time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	for i, v := range vals[1:] {
		b = append(b, recordKeys[i]...)
		b = append(b, v...)
	}
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"latency_us":`...)
	b = strconv.AppendInt(b, e.LatencyUs, 10)
	return append(b, "}\n"...), true
}

// recordKeys are what comes before each string after the time, in the
// order of Entry's fields (which encoding/json follows).
var recordKeys = [...]string{`","tenant_id":"`, `","instance":"`, `","caller":"`, `","agent":"`, `","actor":"`,
	`","subject":"`, `","tool":"`, `","action":"`, `","outcome":"`}

// plain reports whether encoding/json writes s as itself between quotes:
// printable ASCII without the characters it escapes (the quote, the
// backslash and, HTML-safe by default, <, > and &).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
