package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestExperimentsFlags: -h lists the experiments and exits 0; an unknown
// experiment or size exits 2 naming the problem, before anything runs.
func TestExperimentsFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "toast-rewrite"},
		{[]string{"-only", "no-such"}, 2, `unknown experiment "no-such"`},
		{[]string{"-size", "medium"}, 2, `size "medium"`},
	} {
		var out, errb bytes.Buffer
		if code := experimentsMain(tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}
