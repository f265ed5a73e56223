package pglisten_test

import (
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
)

func TestReadNotifyConfig(t *testing.T) {
	t.Parallel()
	r := config.FromMap(nil)
	c := pglisten.ReadNotifyConfig(r)
	if r.Err() != nil || c.Mode != pglisten.DefaultMode || c.Interval != pglisten.DefaultInterval || !c.Debounced() {
		t.Fatalf("defaults: %+v, %v", c, r.Err())
	}
	r = config.FromMap(map[string]string{"NOTIFY_MODE": "commit", "NOTIFY_INTERVAL": "20ms"})
	if c := pglisten.ReadNotifyConfig(r); r.Err() != nil || c.Debounced() || c.Interval != 20*time.Millisecond {
		t.Fatalf("commit, 20ms: %+v, %v", c, r.Err())
	}
	r = config.FromMap(map[string]string{"NOTIFY_MODE": "sometimes", "NOTIFY_INTERVAL": "2s"})
	pglisten.ReadNotifyConfig(r)
	for _, name := range []string{"NOTIFY_MODE", "NOTIFY_INTERVAL"} {
		if err := r.Err(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
}
