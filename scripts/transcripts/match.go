package transcripts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// MaskedFields are the JSON fields whose values vary from run to run
// (positions, offsets, process ids, WAL sizes, scan counts, when a
// periodic cleaner last ran), besides every
// field whose name ends in _ms or _s: a doc's value matches any value of
// the same JSON type (or null).
var MaskedFields = []string{
	"position", "global_position", "lag", "active_pid", "restart_lsn", "confirmed_flush_lsn",
	"retained_wal_bytes", "records_scanned", "partitions", "walsender_pid", "consistent_point",
	"retention_last_run_unix", "retention_passes",
	// The server's version string: a Debian point release (15.18, 15.20)
	// differs between machines of one kind; the documents pair's notes
	// still say when FerretDB stands in.
	"server",
	// no-redis: whether a PUT's own UPDATE also comes back as a NOTIFY
	// that invalidates again depends on timing.
	"invalidations",
}

func masked(key string) bool {
	return strings.HasSuffix(key, "_ms") || strings.HasSuffix(key, "_s") || slices.Contains(MaskedFields, key)
}

// Varying text: what a doc's value matches in an answer, in the order
// tried. A UUID and an event-store position (<xid>:<global_pos>) are
// bound; a time only has to be one.
var (
	uuidRE     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE     = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})`)
	positionRE = regexp.MustCompile(`\b\d+:\d+\b`)
	varyingRE  = regexp.MustCompile(timeRE.String() + `|` + uuidRE.String() + `|` + positionRE.String())
)

// Bindings maps values shown in a doc to the values the service really
// answered, learnt in the order the answers come.
type Bindings map[string]string

// bind records doc → got, or says why it contradicts an earlier binding.
func (b Bindings) bind(doc, got string) error {
	if old, ok := b[doc]; ok && old != got {
		return fmt.Errorf("the doc's %q was %q in an earlier answer, now %q", doc, old, got)
	}
	if len(doc) >= 4 {
		b[doc] = got
	}
	return nil
}

// Apply replaces every bound doc value in s by the real one, longest
// first.
func (b Bindings) Apply(s string) string {
	keys := make([]string, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	pairs := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		pairs = append(pairs, k, b[k])
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// Match compares an answer with the doc's expected lines, binding what
// varies; the error says what differs.
func Match(want []string, got string, b Bindings) error {
	w := nonBlank(want)
	g := nonBlank(strings.Split(got, "\n"))
	if len(w) > 1 {
		if wv, ok := wholeJSON(strings.Join(w, "\n")); ok {
			gv, ok := wholeJSON(strings.Join(g, "\n"))
			if !ok {
				return fmt.Errorf("want one JSON document, got:\n%s", strings.Join(g, "\n"))
			}
			return matchJSON("", "", wv, gv, b)
		}
	}
	if len(w) != len(g) {
		return fmt.Errorf("want %d lines, got %d:\n%s", len(w), len(g), strings.Join(g, "\n"))
	}
	for i := range w {
		if err := matchLine(w[i], g[i], b); err != nil {
			return fmt.Errorf("line %d: %w\n  want: %s\n  got:  %s", i+1, err, w[i], g[i])
		}
	}
	return nil
}

func nonBlank(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l = strings.TrimRight(l, " \t\r"); strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func wholeJSON(s string) (any, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// leadingJSON finds the first JSON object or array in s and returns the
// text before it, the value and the text after it.
func leadingJSON(s string) (before string, v any, after string, ok bool) {
	i := strings.IndexAny(s, "{[")
	if i < 0 {
		return "", nil, "", false
	}
	dec := json.NewDecoder(strings.NewReader(s[i:]))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", nil, "", false
	}
	return s[:i], v, s[i+int(dec.InputOffset()):], true
}

func matchLine(w, g string, b Bindings) error {
	if wb, wv, wa, ok := leadingJSON(w); ok {
		gb, gv, ga, ok := leadingJSON(g)
		if !ok {
			return fmt.Errorf("want JSON, got none")
		}
		if err := matchText(wb, gb, b); err != nil {
			return err
		}
		if err := matchJSON("", "", wv, gv, b); err != nil {
			return err
		}
		return matchText(wa, ga, b)
	}
	return matchText(w, g, b)
}

// matchText matches text exactly but for the varying values (uuidRE,
// timeRE, positionRE), after replacing the doc's values bound so far.
func matchText(w, g string, b Bindings) error {
	w = b.Apply(w)
	real := map[string]bool{} // values put in by Apply: they must appear as they are
	for _, v := range b {
		real[v] = true
	}
	var re strings.Builder
	re.WriteString("^")
	var vars []string
	last := 0
	for _, m := range varyingRE.FindAllStringIndex(w, -1) {
		re.WriteString(regexp.QuoteMeta(w[last:m[0]]))
		v := w[m[0]:m[1]]
		switch {
		case real[v]:
			re.WriteString(regexp.QuoteMeta(v))
			last = m[1]
			continue
		case timeRE.MatchString(v):
			re.WriteString("(" + timeRE.String() + ")")
		case uuidRE.MatchString(v):
			re.WriteString("(" + uuidRE.String() + ")")
		default:
			re.WriteString(`(\d+:\d+)`)
		}
		vars = append(vars, v)
		last = m[1]
	}
	re.WriteString(regexp.QuoteMeta(w[last:]) + "$")
	m := regexp.MustCompile(re.String()).FindStringSubmatch(g)
	if m == nil {
		return fmt.Errorf("text differs: want %q, got %q", w, g)
	}
	for i, v := range vars {
		if timeRE.MatchString(v) || v == m[i+1] {
			continue
		}
		if err := b.bind(v, m[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func matchJSON(path, key string, w, g any, b Bindings) error {
	at := path
	if at == "" {
		at = "."
	}
	if masked(key) {
		if w == nil || g == nil {
			return nil
		}
		if kind(w) != kind(g) {
			return fmt.Errorf("%s: want a %s, got %s", at, kind(w), kind(g))
		}
		if ws, ok := w.(string); ok {
			return b.bind(ws, g.(string))
		}
		return nil
	}
	if kind(w) != kind(g) {
		return fmt.Errorf("%s: want %s %s, got %s %s", at, kind(w), compact(w), kind(g), compact(g))
	}
	switch wv := w.(type) {
	case map[string]any:
		gv := g.(map[string]any)
		var missing, extra []string
		for k := range wv {
			if _, ok := gv[k]; !ok {
				missing = append(missing, k)
			}
		}
		for k := range gv {
			if _, ok := wv[k]; !ok {
				extra = append(extra, k)
			}
		}
		if len(missing) > 0 || len(extra) > 0 {
			sort.Strings(missing)
			sort.Strings(extra)
			return fmt.Errorf("%s: fields differ: the doc has %v that the answer lacks, the answer has %v that the doc lacks", at, missing, extra)
		}
		keys := make([]string, 0, len(wv))
		for k := range wv {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := matchJSON(path+"."+k, k, wv[k], gv[k], b); err != nil {
				return err
			}
		}
	case []any:
		gv := g.([]any)
		if len(wv) != len(gv) {
			return fmt.Errorf("%s: want %d elements, got %d: %s", at, len(wv), len(gv), compact(g))
		}
		for i := range wv {
			if err := matchJSON(fmt.Sprintf("%s[%d]", path, i), key, wv[i], gv[i], b); err != nil {
				return err
			}
		}
	case string:
		if err := matchText(wv, g.(string), b); err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
	default:
		if compact(w) != compact(g) {
			return fmt.Errorf("%s: want %s, got %s", at, compact(w), compact(g))
		}
	}
	return nil
}

func compact(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSpace(buf.String())
}
