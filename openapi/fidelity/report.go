package fidelity

import (
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"text/tabwriter"

	"github.com/getkin/kin-openapi/openapi3"
)

// DescriptionOperations counts the operations of a description.
func DescriptionOperations(doc *openapi3.T) int {
	n := 0
	if doc == nil || doc.Paths == nil {
		return 0
	}
	for _, item := range doc.Paths.Map() {
		n += len(item.Operations())
	}
	return n
}

// Sample returns n results picked at random with seed, in their original
// order; all of them when n <= 0 or n >= len(results).
func Sample(results []Result, n int, seed uint64) []Result {
	if n <= 0 || n >= len(results) {
		return results
	}
	r := rand.New(rand.NewPCG(seed, seed))
	idx := r.Perm(len(results))[:n]
	slices.Sort(idx)
	out := make([]Result, 0, n)
	for _, i := range idx {
		out = append(out, results[i])
	}
	return out
}

// WriteTable prints one line per result: operation id, result, reason.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tTOOL\tRESULT\tREASON")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s.%s\t%s\t%s\n", r.OperationID, r.Entity, r.Action, r.Status, r.Reason)
	}
	return tw.Flush()
}

// SummaryLine is the one-line summary: operations in the description,
// imported into the registry, and valid among those called.
func SummaryLine(described int, o Outcome) string {
	imported := len(o.Results)
	return fmt.Sprintf("summary: %d operations in the description, %d imported (%s), %d of %d called valid (%s), %d skipped",
		described, imported, pct(imported, described), o.Valid(), o.Total, pct(o.Valid(), o.Total), len(o.Skipped))
}

func pct(n, d int) string {
	if d == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(d))
}

// WriteSummary prints the summary line and the reasons of the operations
// that are not ok, grouped with counts (most frequent first).
func WriteSummary(w io.Writer, described int, o Outcome) error {
	if _, err := fmt.Fprintln(w, SummaryLine(described, o)); err != nil {
		return err
	}
	counts := map[string]int{}
	for _, r := range o.Results {
		if r.Status != OK {
			counts[r.Group]++
		}
	}
	groups := make([]string, 0, len(counts))
	for g := range counts {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	for _, g := range groups {
		if _, err := fmt.Fprintf(w, "  %4d  %s\n", counts[g], g); err != nil {
			return err
		}
	}
	return nil
}
