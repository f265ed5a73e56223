package driver

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// proseWords is how many plain words (letters only: "the", "mode's")
// make a string a sentence rather than a figure, a status or a setting
// ("topic t, all 8 partitions", "kill -9 1 of 2").
const proseWords = 10

// statusKeys are the fields whose strings are statuses or errors, free
// to be sentences: what went wrong, in the words of whatever failed
// ("invalid": a ceiling step's or search's precondition that did not
// hold, CeilingStep.Invalid, CeilingRound.Invalid; "precondition": a
// side's, SideResult.Precondition).
//
// "status" is a state and its reason; "body" and "message" are what a
// server or service answered, in its words. A field whose name ends in
// "_" and one of these ("fault_errors", "mongo_status", "readyz_reason",
// "readyz_body", the experiments' settings) is one too (isStatusKey).
var statusKeys = map[string]bool{"error": true, "errors": true, "error_samples": true, "reason": true, "why": true, "aborted": true,
	"invalid": true, "precondition": true, "status": true, "body": true, "message": true}

// isStatusKey reports whether a field named k holds a status or an
// error: one of statusKeys, or a name ending in "_" and one of them.
func isStatusKey(k string) bool {
	if statusKeys[k] {
		return true
	}
	i := strings.LastIndex(k, "_")
	return i >= 0 && statusKeys[k[i+1:]]
}

// Prose returns every string in v's JSON that reads as an explanatory
// sentence (proseWords plain words or more), as "path: text": a results
// file holds figures, statuses and settings only. Status fields
// (statusKeys) are skipped, and a note (Run.Notes, any "notes" list) is
// judged by its "what" alone, the words before its first ": ", the rest
// being the incident's error.
func Prose(v any) ([]string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var out []string
	walkProse(doc, "", &out)
	return out, nil
}

func walkProse(v any, path string, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !isStatusKey(k) {
				walkProse(x[k], path+"."+k, out)
			}
		}
	case []any:
		for i, e := range x {
			walkProse(e, fmt.Sprintf("%s[%d]", path, i), out)
		}
	case string:
		text := x
		if strings.Contains(path, "notes[") {
			text, _, _ = strings.Cut(x, ": ")
		}
		if plainWords(text) >= proseWords {
			*out = append(*out, path+": "+x)
		}
	}
}

// plainWords counts the words of s made of letters alone (an apostrophe
// inside allowed), once the punctuation around them is trimmed:
// identifiers, figures and settings ("no-redis", "CACHE_MODE=local",
// "400/s") are no words.
func plainWords(s string) int {
	n := 0
	for _, f := range strings.Fields(s) {
		f = strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if f == "" {
			continue
		}
		word := true
		for _, r := range f {
			if !unicode.IsLetter(r) && r != '\'' && r != '’' {
				word = false
				break
			}
		}
		if word {
			n++
		}
	}
	return n
}
