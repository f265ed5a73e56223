package log

import (
	"bytes"
	"strings"
	"testing"
)

// TestGroupNames checks the name rule on both sides of its edges, and
// that the OpenAPI document states the pattern the handler checks.
func TestGroupNames(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "billing", "a_1", "default", "z" + strings.Repeat("9", 31)} {
		if err := ValidGroup(ok); err != nil {
			t.Errorf("ValidGroup(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "A", "1a", "_a", "a-b", "a.b", "a b", "é", strings.Repeat("a", 33)} {
		if err := ValidGroup(bad); err == nil || !strings.Contains(err.Error(), GroupNameRule) {
			t.Errorf("ValidGroup(%q) = %v, want an error naming the rule", bad, err)
		}
	}
	if n := bytes.Count(OpenAPI, []byte("pattern: '"+GroupPattern+"'")); n != 2 {
		t.Errorf("the OpenAPI document states the group pattern %d times, want 2 (the path and the query parameter)", n)
	}
	if WaitKey("", "x") != "x" || WaitKey(DefaultGroup, "x") != "x" || WaitKey("g", "x") != "g/x" {
		t.Error("WaitKey: the default group's key is the id alone, another group's group/id")
	}
}
