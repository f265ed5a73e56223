package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
)

// sourceFile is one results file a report read: its name, what it holds,
// when it ran, and whether it comes from the cluster profile (measured
// apart from `make results`, as root, on three-node clusters).
type sourceFile struct {
	name, what string
	start, end time.Time
	cluster    bool
}

// sourceFiles lists every results file the report reads: the runs (rs),
// the benches', the raw loops', the experiments' (the documents pair's
// beyond CRUD too), and the cluster
// profile's failover and durability files.
func sourceFiles(rs []*driver.Run, src Sources) []sourceFile {
	var out []sourceFile
	for _, r := range append(slices.Clone(rs), src.Bench...) {
		if r != nil {
			out = append(out, sourceFile{name: resultfile.FileOf(r.ID), what: r.Command, start: r.StartedAt, end: r.FinishedAt})
		}
	}
	if r := src.Raw; r.ID != "" {
		out = append(out, sourceFile{name: resultfile.FileOf(r.ID), what: "raw", start: r.StartedAt, end: r.FinishedAt})
	}
	if x := src.Experiments; x != nil {
		out = append(out, sourceFile{name: resultfile.Name(x.Started, resultfile.Experiments), what: string(resultfile.Experiments), start: x.Started, end: x.Ended()})
	}
	if x := src.BeyondCRUD; x != nil {
		out = append(out, sourceFile{name: src.BeyondCRUDFile, what: "beyond-crud", start: x.Started, end: x.Ended()})
	}
	seen := map[string]bool{}
	for _, p := range src.FailoverParts {
		if p.File != nil && !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, sourceFile{name: p.Name, what: "failover", start: p.File.Started, end: p.File.Started, cluster: true})
		}
	}
	for _, p := range src.Durability {
		if p.Run != nil && p.Measured() {
			out = append(out, sourceFile{name: p.File, what: "durability", start: p.Run.StartedAt, end: p.Run.FinishedAt, cluster: true})
		}
	}
	// A file that recorded no start time (a fixture, a hand-made file)
	// belongs to no invocation.
	out = slices.DeleteFunc(out, func(f sourceFile) bool { return f.start.IsZero() })
	slices.SortStableFunc(out, func(a, b sourceFile) int { return a.start.Compare(b.start) })
	return out
}

// invocation is a group of results files written by one command: files
// that follow each other within sessionGap.
type invocation struct {
	files      []sourceFile
	start, end time.Time
}

// invocations groups the single-node files of fs (the cluster profile's
// apart) by invocation, in start order.
func invocations(fs []sourceFile) []invocation {
	var out []invocation
	for _, f := range fs {
		if f.cluster {
			continue
		}
		end := f.end
		if end.IsZero() || end.Before(f.start) {
			end = f.start
		}
		if n := len(out); n > 0 && f.start.Sub(out[n-1].end) <= sessionGap {
			out[n-1].files = append(out[n-1].files, f)
			if end.After(out[n-1].end) {
				out[n-1].end = end
			}
			continue
		}
		out = append(out, invocation{files: []sourceFile{f}, start: f.start, end: end})
	}
	return out
}

// span words an invocation's time: "2026-12-05 14:02–17:31 UTC (3h29m)".
func (iv invocation) span() string {
	return fmt.Sprintf("%s–%s UTC (%s)", iv.start.UTC().Format("2006-01-02 15:04"), iv.end.UTC().Format("15:04"), driver.Human(iv.end.Sub(iv.start)))
}

// provenanceLine is the README's first line about where its figures come
// from: one invocation with its time and length, or how many, and the
// cluster profile's files apart.
func provenanceLine(fs []sourceFile) string {
	ivs := invocations(fs)
	var s string
	switch len(ivs) {
	case 0:
		return "No results files were read."
	case 1:
		s = fmt.Sprintf("Every single-node figure below comes from one `make results` invocation, %s, %d results files", ivs[0].span(), len(ivs[0].files))
	default:
		s = fmt.Sprintf("The single-node figures below come from %d separate invocations (%s), not one `make results` run", len(ivs), ivs[0].span()+" to "+ivs[len(ivs)-1].span())
	}
	var cluster []string
	for _, f := range fs {
		if f.cluster {
			cluster = append(cluster, f.start.UTC().Format("2006-01-02"))
		}
	}
	slices.Sort(cluster)
	cluster = slices.Compact(cluster)
	if len(cluster) > 0 {
		s += fmt.Sprintf("; the failover and durability lines, from the cluster profile's runs of %s", strings.Join(cluster, ", "))
	}
	return s + " ([every file](RESULTS.md#sources))."
}

// SourcesTitle is RESULTS.md's heading of the list of files read.
const SourcesTitle = "Sources"

// sourcesSection lists every file the report read, grouped by invocation,
// the cluster profile's apart.
func sourcesSection(fs []sourceFile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s\n\nEvery results file this report read, by invocation (files written within %s of each other count as one).\n\n", SourcesTitle, driver.Human(sessionGap))
	for i, iv := range invocations(fs) {
		var names []string
		for _, f := range iv.files {
			names = append(names, fmt.Sprintf("`results/%s` (%s)", f.name, f.what))
		}
		fmt.Fprintf(&b, "- Invocation %d, %s: %s.\n", i+1, iv.span(), strings.Join(names, ", "))
	}
	var cl []string
	for _, f := range fs {
		if f.cluster {
			cl = append(cl, fmt.Sprintf("`results/%s` (%s, %s UTC)", f.name, f.what, f.start.UTC().Format("2006-01-02 15:04")))
		}
	}
	if len(cl) > 0 {
		fmt.Fprintf(&b, "- The cluster profile (measured apart, as root, on three-node clusters): %s.\n", strings.Join(cl, "; "))
	}
	return b.String()
}
