package mcp

import (
	"bytes"
	"net/http"

	"github.com/switchboardhq/switchboard"
)

// MaxBatchResponse bounds the answers to one batch: an answer that would
// take them past it is replaced by a -32603 error (response_too_large)
// that keeps its id, so the client can send that request alone.
const MaxBatchResponse = 16 << 20

// serveBatch answers a JSON-RPC batch (at most MaxBatch messages, checked
// by parseMessages). Batches exist only before protocol version
// 2025-06-18; later and unknown versions go to the SDK, which refuses them.
// The fast path never answers a batch: its answer is an array. Messages
// of unknown methods are answered here (-32601 for a request, nothing for
// a notification), the rest by the SDK, and the answers together stay
// within MaxBatchResponse.
func (h *handler) serveBatch(w http.ResponseWriter, r *http.Request, msgs []envelope, body []byte, version string) {
	if version != "" && (!legacyVersions[version] || version >= version20250618) {
		h.serveSDK(w, r, body)
		return
	}
	var kept, answers [][]byte
	for i := range msgs {
		env := &msgs[i]
		if !unknownMethod(env) {
			kept = append(kept, env.raw)
			continue
		}
		if env.id != nil {
			answers = append(answers, rpcErrorJSON(env.id, switchboard.ProblemOf(
				switchboard.E(switchboard.ErrNotFound, "method_not_found", "%s", methodNotFoundMessage(env.method)))))
		}
	}
	header := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-cache, no-transform"}}
	if len(kept) > 0 {
		rec := newResponseBuffer()
		h.serveSDK(rec, r, joinBatch(kept))
		switch {
		case rec.code() == http.StatusAccepted:
			// Only notifications were left: nothing from the SDK.
		case rec.code() == http.StatusOK && rec.header.Get("Content-Type") == "application/json":
			elems, ok := scanArray(bytes.TrimSpace(rec.body.Bytes()))
			if !ok {
				rec.send(w, nil)
				return
			}
			answers = append(elems, answers...)
			header = rec.header
		default:
			// The SDK refused the batch: its answer stands for all of it.
			rec.send(w, nil)
			return
		}
	}
	if len(answers) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(http.StatusOK)
	w.Write(boundedArray(answers, MaxBatchResponse))
}

// joinBatch is the batch of msgs.
func joinBatch(msgs [][]byte) []byte {
	return append(append([]byte{'['}, bytes.Join(msgs, []byte{','})...), ']')
}

// boundedArray is the JSON array of answers, each answer that would take
// it past limit bytes replaced by a response_too_large error with its id.
func boundedArray(answers [][]byte, limit int) []byte {
	out := []byte{'['}
	for i, a := range answers {
		if len(out)+len(a) > limit {
			a = rpcErrorJSON(responseID(a), switchboard.ProblemOf(switchboard.E(switchboard.ErrInvalid, "response_too_large",
				"the answers to this batch would exceed %d bytes; send this request alone", limit)))
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, a...)
	}
	return append(out, ']')
}

// responseID is the id of the JSON-RPC response a, or null.
func responseID(a []byte) []byte {
	members, _ := scanObject(nil, a)
	for _, m := range members {
		if m.key == "id" {
			return m.raw
		}
	}
	return nullID
}
