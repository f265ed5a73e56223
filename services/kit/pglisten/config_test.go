package pglisten_test

import (
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
)

func TestReadNotifyConfig(t *testing.T) {
	t.Parallel()
	read := configtest.Part(pglisten.ReadNotifyConfig)
	if c := configtest.Defaults(t, read); c.Mode != pglisten.DefaultMode || c.Interval != pglisten.DefaultInterval || !c.Debounced() {
		t.Fatalf("defaults: %+v", c)
	}
	if c, err := read(config.FromMap(map[string]string{"NOTIFY_MODE": "commit", "NOTIFY_INTERVAL": "20ms"})); err != nil || c.Debounced() || c.Interval != 20*time.Millisecond {
		t.Fatalf("commit, 20ms: %+v, %v", c, err)
	}
	configtest.NamesBadVariables(t, read, map[string]string{"NOTIFY_MODE": "sometimes", "NOTIFY_INTERVAL": "2s"}, "NOTIFY_MODE", "NOTIFY_INTERVAL")
}
