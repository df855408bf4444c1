package server_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// labelValue matches one label of a series in the exposition format.
var labelValue = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrapeMetrics reads base's /metrics with the operator token, after
// checking that it is refused without one.
func scrapeMetrics(t *testing.T, base, operatorToken string) string {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token = %d, want 401", res.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/metrics with the operator token = %d %s", res.StatusCode, b)
	}
	return string(b)
}

// hasSeries reports whether text holds a sample of name whose labels
// include every one of labels (name=value pairs) and whose value is not 0.
func hasSeries(text, name string, labels ...string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			if !strings.Contains(line, k+`="`+v+`"`) {
				ok = false
				break
			}
		}
		if ok && !strings.HasSuffix(line, " 0") {
			return true
		}
	}
	return false
}

// noIdentityLabels fails when any label value of text holds one of ids
// (tenant, user, agent, caller identifiers): they are unbounded, so they
// are never labels.
func noIdentityLabels(t *testing.T, text string, ids ...string) {
	t.Helper()
	for _, m := range labelValue.FindAllStringSubmatch(text, -1) {
		for _, id := range ids {
			if id != "" && strings.Contains(m[2], id) {
				t.Errorf("label %s=%q holds the identifier %q", m[1], m[2], id)
			}
		}
	}
}

// grepLines returns text's lines that start with prefix.
func grepLines(text, prefix string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
