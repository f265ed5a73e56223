// Area: durability. Answered writes survive a graceful restart and a
// crash, on a target of its own.

package conformance

import (
	"testing"
)

// runRestart checks that answered writes survive a restart and a crash,
// on a target of its own.
func runRestart(t *testing.T, f Features, newTarget NewTarget) {
	t.Run("WritesSurviveRestartAndCrash", func(t *testing.T) {
		t.Parallel()
		testRestartCrash(t, side{Target: newTarget(t), Features: f})
	})
	t.Run("ChangesResumeAcrossRestartAndCrash", func(t *testing.T) {
		t.Parallel()
		testChangesSurviveRestart(t, side{Target: newTarget(t), Features: f})
	})
}

// testRestartCrash checks that what a side answered survives a graceful
// restart and a crash: users created, patched and deleted before are
// found (or not found) as answered after.
func testRestartCrash(t *testing.T, tg side) {
	c := &client{t: t, base: tg.URL()}
	kept := c.create(uniqueEmail(t, "kept"), map[string]any{"n": 1})
	c.must(200, "PATCH", "/users/"+kept.ID+"/profile", map[string]any{"n": 2, "tag": "patched"}, nil)
	gone := c.create(uniqueEmail(t, "gone"), map[string]any{"n": 3})
	c.must(204, "DELETE", "/users/"+gone.ID, nil, nil)
	check := func(after string) {
		t.Helper()
		c := &client{t: t, base: tg.URL()}
		sameJSON(t, "profile after "+after, c.profile(kept.ID), map[string]any{"n": 2, "tag": "patched"})
		if status, raw := c.do("GET", "/users/"+gone.ID, nil); status != 404 {
			t.Errorf("deleted user after %s: %d %s, want 404", after, status, raw)
		}
		if status, raw := c.do("POST", "/users", map[string]any{"email": kept.Email, "name": "n", "plan": "p"}); status != 409 {
			t.Errorf("duplicate email after %s: %d %s, want 409 (the unique index survived)", after, status, raw)
		}
	}
	tg.Restart(t)
	check("a restart")
	tg.Crash(t)
	check("a crash")
}
