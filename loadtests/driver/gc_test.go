package driver

import (
	"runtime/debug"
	"testing"
)

// TestLessGCRestoresAfterTheLastAttack: overlapping attacks share the
// raised GOGC, and the last one to end restores the previous setting.
func TestLessGCRestoresAfterTheLastAttack(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	end1 := lessGC()
	end2 := lessGC()
	if got := debug.SetGCPercent(AttackGCPercent); got != AttackGCPercent {
		t.Fatalf("GOGC during attacks %d, want %d", got, AttackGCPercent)
	}
	end1()
	if got := debug.SetGCPercent(AttackGCPercent); got != AttackGCPercent {
		t.Fatalf("GOGC with one attack left %d, want %d", got, AttackGCPercent)
	}
	end2()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC after the attacks %d, want 100 restored", got)
	}
}
