package main

import (
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	c := configtest.Defaults(t, readConfig)
	if c.HTTP.Addr != "127.0.0.1:8084" || c.Postgres.Schema != "log" || c.Slot != "no_kafka" || c.SynchronousCommit != "on" ||
		c.StatusInterval != time.Second || c.ReplicationURL != c.Postgres.URL {
		t.Fatalf("defaults: %+v", c)
	}
	configtest.NamesBadVariables(t, readConfig, map[string]string{"ADDR": "8084", "DATABASE_MAX_CONNS": "0", "DATABASE_SCHEMA": "Bad-Name",
		"SLOT_NAME": "Bad-Slot", "SYNCHRONOUS_COMMIT": "maybe", "STANDBY_STATUS_INTERVAL": "0s", "CONSUMER_MAX_BATCH": "0",
		"REPLICATION_URL": "postgres://localhost:6432/wpe", "MAX_GROUPS": "0", "GROUP_POLL_INTERVAL": "0s", "SLOT_PLUGIN": "test_decoding"},
		"ADDR", "DATABASE_MAX_CONNS", "DATABASE_SCHEMA", "SLOT_NAME", "SYNCHRONOUS_COMMIT", "STANDBY_STATUS_INTERVAL", "CONSUMER_MAX_BATCH", "REPLICATION_URL",
		"MAX_GROUPS", "GROUP_POLL_INTERVAL", "SLOT_PLUGIN")
	configtest.NamesBadVariables(t, readConfig, map[string]string{"MAX_GROUPS": "1001"}, "MAX_GROUPS")
	configtest.NamesBadVariables(t, readConfig, map[string]string{"GROUPS_DESIGN": "rows"}, "GROUPS_DESIGN")
	if c.SlotPlugin != PluginWal2json {
		t.Errorf("SLOT_PLUGIN's default: %q, want wal2json (nothing changes unless it is set)", c.SlotPlugin)
	}
	if c := kittest.ReadConfig(t, readConfig, map[string]string{"SLOT_PLUGIN": "pgoutput"}); c.SlotPlugin != PluginPgoutput {
		t.Errorf("SLOT_PLUGIN=pgoutput read as %q", c.SlotPlugin)
	}
	if c.GroupsDesign != DesignSlots {
		t.Errorf("GROUPS_DESIGN's default: %q, want %q (nothing changes unless it is set)", c.GroupsDesign, DesignSlots)
	}
	if c := kittest.ReadConfig(t, readConfig, map[string]string{"GROUPS_DESIGN": "cursors"}); c.GroupsDesign != DesignCursors {
		t.Errorf("GROUPS_DESIGN=cursors read as %q", c.GroupsDesign)
	}
	if c.MaxGroups != 16 || c.GroupPoll != 2*time.Second || c.ConsumeGroups.String() != logc.AllGroups {
		t.Errorf("group defaults: MAX_GROUPS %d, GROUP_POLL_INTERVAL %v, CONSUME_GROUPS %s", c.MaxGroups, c.GroupPoll, c.ConsumeGroups)
	}
	configtest.ReadsBack(t, readConfig, configtest.Var[Config]{Name: logc.ConsumeGroupsVar, Good: "billing,audit", Get: func(c Config) string { return c.ConsumeGroups.String() }, Bad: []string{"billing,,audit", "billing,billing", "Billing"}})
}

func TestStartsMigratesAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	kittest.CheckShared(t, tg.URL(), info.Service, info.Pair, info.Backend)
}
