package servicetest

import (
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// RefusesToStart checks that build refuses to start a service from cfg,
// within a minute (logging as kittest.Logger says), with an error that
// contains want: the variable to blame, or the reason. A service that
// starts anyway is stopped, and tb fails. It returns the refusal.
func RefusesToStart[C Config](tb testing.TB, build Build[C], cfg C, want string) error {
	tb.Helper()
	svc, err := build(kittest.Context(tb, time.Minute), cfg, kittest.Logger(cfg))
	if err == nil {
		_ = svc.Stop(kittest.Context(tb, 30*time.Second))
		tb.Fatalf("the service started, want a refusal containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		tb.Fatalf("start failed with %v, want a refusal containing %q", err, want)
	}
	return err
}
