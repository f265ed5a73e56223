package transcripts

import (
	"strings"
	"testing"
)

func TestMatchBindsIDsAndMasksWhatVaries(t *testing.T) {
	t.Parallel()
	b := Bindings{}
	want := []string{`{"id":"01a22ab4-ed39-7258-9589-0c9f507759be","status":"queued","enqueued_at":"2026-11-30T04:27:10.009546401Z","uptime_s":17.9}`}
	got := `{"status":"queued","id":"01a23314-aa33-7b6d-9c69-8143f4a54408","enqueued_at":"2026-12-01T19:00:00Z","uptime_s":0.5}`
	if err := Match(want, got, b); err != nil {
		t.Fatalf("a new id, time and uptime (keys in another order) should match: %v", err)
	}
	if cmd := b.Apply("curl localhost:8082/tasks/01a22ab4-ed39-7258-9589-0c9f507759be/wait"); !strings.Contains(cmd, "01a23314-aa33-7b6d-9c69-8143f4a54408") {
		t.Errorf("the doc's id was not replaced by the real one in a later command: %s", cmd)
	}
	// The same doc id must stay the same real id.
	err := Match([]string{`{"error":"task 01a22ab4-ed39-7258-9589-0c9f507759be: not found"}`}, `{"error":"task 01a23314-0000-7b6d-9c69-8143f4a54408: not found"}`, b)
	if err == nil {
		t.Error("a different id where the doc repeats one matched")
	}
}

func TestMatchFailsOnDrift(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		want []string
		got  string
	}{
		{"error text", []string{`{"error":"key is required"}`, " 400"}, `{"error":"key is required and must not be blank"}` + "\n 400"},
		{"status code", []string{`{"error":"x"}`, " 400"}, `{"error":"x"}` + "\n 422"},
		{"new field", []string{`{"counters":{"dead":0}}`}, `{"counters":{"dead":0,"shed":0}}`},
		{"missing field", []string{`{"a":1,"b":2}`}, `{"a":1}`},
		{"a count", []string{`{"queued":0}`}, `{"queued":1}`},
		{"a type", []string{`{"version":1}`}, `{"version":"1"}`},
		{"header", []string{`{"id":42} X-Cache: hit (local)`}, `{"id":42} X-Cache: miss (origin)`},
		{"a line more", []string{"204"}, "204\n204"},
		{"multi-line JSON", []string{"{", `  "a": 1`, "}"}, "{\n  \"a\": 2\n}"},
	}
	for _, c := range cases {
		if err := Match(c.want, c.got, Bindings{}); err == nil {
			t.Errorf("%s: %q matched %q", c.name, c.got, c.want)
		}
	}
}

func TestMatchIgnoresBlankLinesAndMaskedFields(t *testing.T) {
	t.Parallel()
	want := []string{`{"position":"127519:30985","global_position":30985,"lag":872,"safe_wal_size":null}`, "", " 201"}
	got := `{"position":"9:3","global_position":3,"lag":0,"safe_wal_size":null}` + "\n 201\n"
	b := Bindings{}
	if err := Match(want, got, b); err != nil {
		t.Fatal(err)
	}
	if err := Match([]string{"id: 127519:30985"}, "id: 9:3", b); err != nil {
		t.Errorf("a bound position in text: %v", err)
	}
}

func TestParseConvention(t *testing.T) {
	t.Parallel()
	doc := strings.Join([]string{
		"<!-- transcript: no-redis CACHE_MODE=local DATABASE_SCHEMA=cache_demo; redis -->",
		"```console",
		"$ curl -s localhost:8088/kv/a",
		`{"error":"x"}`,
		"",
		"$ ID=$(curl -s localhost:8088/x)",
		"```",
		"",
		"<!-- transcript: skip a benchmark -->",
		"```",
		"$ go test -bench .",
		"```",
	}, "\n")
	blocks, skipped, err := Parse("d.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 1 || len(skipped) != 1 || skipped[0].Reason != "a benchmark" {
		t.Fatalf("blocks %+v, skipped %+v", blocks, skipped)
	}
	b := blocks[0]
	if len(b.Services) != 2 || b.Services[0].Key() != "no-redis CACHE_MODE=local DATABASE_SCHEMA=cache_demo" || b.Services[1].Name != "redis" {
		t.Errorf("services %+v", b.Services)
	}
	if len(b.Steps) != 2 || b.Steps[0].Line != 3 || b.Steps[1].Want != nil || b.Line != 2 {
		t.Errorf("steps %+v", b.Steps)
	}
	for name, bad := range map[string]string{
		"console without a marker":  "```console\n$ curl x\n```",
		"commands in a plain block": "```\n$ curl x\n```",
		"skip without a reason":     "<!-- transcript: skip -->\n```\n$ curl x\n```",
		"a bad setting":             "<!-- transcript: redis mode -->\n```console\n$ curl x\n```",
		"output before a command":   "<!-- transcript: shell -->\n```console\nhello\n$ curl x\n```",
	} {
		if _, _, err := Parse("d.md", bad); err == nil || !strings.Contains(err.Error(), "d.md:") {
			t.Errorf("%s: parsed without an error naming the line (%v)", name, err)
		}
	}
}
