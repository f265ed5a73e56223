// Area: the aggregation report. POST /users/report groups the users a
// containment document matches by a profile string, counts them and
// averages a profile number (Features.ReportAverage), top groups first.

package conformance

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runReport checks the report and its refusals.
func runReport(t *testing.T, c *client, tg side) {
	runTests(t, c, tg, []test{
		{"ReportGroupsCountsAverages", testReport},
		{"ReportBadInput", testReportBadInput},
	})
}

// reportUsers creates the report's data set under tag: de with ages 20,
// 30, 40 (average 30), fr with 20, 30 and "old" (a string: counted, not
// averaged; average 25), no without an age (no average), and two users
// the report leaves out (country a number, country missing).
func reportUsers(t *testing.T, c *client, tag string) {
	t.Helper()
	profiles := []map[string]any{
		{"country": "de", "age": 20}, {"country": "de", "age": 30}, {"country": "de", "age": 40.0},
		{"country": "fr", "age": 20}, {"country": "fr", "age": 30}, {"country": "fr", "age": "old"},
		{"country": "no"}, {"country": 7, "age": 99}, {"age": 99},
	}
	for i, p := range profiles {
		p["rtag"] = tag
		p["meta"] = map[string]any{"n": i}
		c.create(uniqueEmail(t, "report"), p)
	}
}

func testReport(t *testing.T, c *client, tg side) {
	tag := kittest.UniqueName(t, "report")
	reportUsers(t, c, tag)
	match := map[string]any{"rtag": tag}
	var out documents.ReportResponse
	c.must(200, "POST", "/users/report", map[string]any{"match": match, "group_by": "country"}, &out)
	sameJSON(t, "report without average", generic(t, mustJSON(t, out)), map[string]any{"groups": []any{
		map[string]any{"value": "de", "count": 3, "average": nil},
		map[string]any{"value": "fr", "count": 3, "average": nil},
		map[string]any{"value": "no", "count": 1, "average": nil},
	}})
	c.must(200, "POST", "/users/report", map[string]any{"match": match, "group_by": "country", "top": 1}, &out)
	if len(out.Groups) != 1 || out.Groups[0].Value != "de" {
		t.Errorf("top 1: %+v, want de alone (ties by value)", out.Groups)
	}
	c.must(200, "POST", "/users/report", map[string]any{"match": map[string]any{"rtag": tag, "meta": map[string]any{"n": 4}}, "group_by": "country"}, &out)
	if len(out.Groups) != 1 || out.Groups[0].Value != "fr" || out.Groups[0].Count != 1 {
		t.Errorf("nested match: %+v, want fr ×1", out.Groups)
	}
	body := map[string]any{"match": match, "group_by": "country", "average": "age"}
	if !tg.Features.ReportAverage {
		if status, raw := c.do("POST", "/users/report", body); status != 501 || !strings.Contains(string(raw), `"error"`) {
			t.Errorf("average on a side without it: %d %s, want a 501 JSON error", status, raw)
		}
		t.Skip("Features.ReportAverage is false: this side's server cannot average ($group's $avg); the groups and counts passed")
	}
	c.must(200, "POST", "/users/report", body, &out)
	sameJSON(t, "report with average", generic(t, mustJSON(t, out)), map[string]any{"groups": []any{
		map[string]any{"value": "de", "count": 3, "average": 30},
		map[string]any{"value": "fr", "count": 3, "average": 25},
		map[string]any{"value": "no", "count": 1, "average": nil},
	}})
}

func testReportBadInput(t *testing.T, c *client, _ side) {
	for name, body := range map[string]any{
		"no group_by":        map[string]any{},
		"dotted group_by":    map[string]any{"group_by": "a.b"},
		"operator group_by":  map[string]any{"group_by": "$x"},
		"long group_by":      map[string]any{"group_by": strings.Repeat("k", documents.MaxReportKeyLen+1)},
		"dotted average":     map[string]any{"group_by": "a", "average": "b.c"},
		"top 0":              map[string]any{"group_by": "a", "top": 0},
		"top too large":      map[string]any{"group_by": "a", "top": documents.MaxReportTop + 1},
		"array in match":     map[string]any{"group_by": "a", "match": map[string]any{"tags": []any{"x"}}},
		"match not object":   map[string]any{"group_by": "a", "match": []any{1}},
		"unknown field":      map[string]any{"group_by": "a", "having": 1},
		"group_by not text":  map[string]any{"group_by": 1},
		"operator in match":  map[string]any{"group_by": "a", "match": map[string]any{"$where": "1"}},
		"nested array match": map[string]any{"group_by": "a", "match": map[string]any{"o": map[string]any{"a": []any{}}}},
	} {
		if status, raw := c.do("POST", "/users/report", body); status != 400 || !strings.Contains(string(raw), `"error"`) {
			t.Errorf("%s: %d %s, want a 400 JSON error", name, status, raw)
		}
	}
}
