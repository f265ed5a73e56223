package main

import (
	"strings"
	"testing"
)

// TestGroupSlotNames checks that every group's slot is a valid slot name
// (at most 63 characters of a-z, 0-9 and _), different per group and per
// SLOT_NAME, and that groupOfSlot finds the group back, also through the
// hashed form of a long SLOT_NAME.
func TestGroupSlotNames(t *testing.T) {
	t.Parallel()
	bases := []string{"no_kafka", strings.Repeat("s", 63), "s_" + strings.Repeat("x", 50)}
	names := []string{"a", "billing", "a_g_b", strings.Repeat("z", 32)}
	seen := map[string]string{}
	for _, base := range bases {
		for _, name := range names {
			s := groupSlot(base, name)
			if !slotRE.MatchString(s) {
				t.Errorf("groupSlot(%q, %q) = %q: not a slot name", base, name, s)
			}
			if other, dup := seen[s]; dup {
				t.Errorf("groupSlot(%q, %q) = %q, the same as %s", base, name, s, other)
			}
			seen[s] = base + "/" + name
			if got, ok := groupOfSlot(base, s); !ok || got != name {
				t.Errorf("groupOfSlot(%q, %q) = %q %v, want %q", base, s, got, ok, name)
			}
		}
	}
	for _, s := range []string{"no_kafka", "no_kafka_g_", "no_kafka_g_Bad", "other_g_billing", "no_kafka_x_g_billing"} {
		if name, ok := groupOfSlot("no_kafka", s); ok {
			t.Errorf("groupOfSlot(no_kafka, %q) = %q: not one of its group slots", s, name)
		}
	}
}
