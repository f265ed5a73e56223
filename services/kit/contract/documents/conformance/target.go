// ServiceTarget: the Target of a side run in the test's own process.

package conformance

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// ServiceTarget is the Target of a side run in the test's process. Its
// Crash is a Restart: both sides answer a write once their backend
// acknowledged it, so the process holds nothing a crash could lose.
type ServiceTarget struct {
	servicetest.Target[struct{}]
	bodyLimit, searchMaxBytes int64
}

// StartServiceTarget starts a side built by build with cfg, whose
// BODY_LIMIT and SEARCH_MAX_BYTES are bodyLimit and searchMaxBytes.
func StartServiceTarget[C servicetest.Config](t testing.TB, build servicetest.Build[C], cfg C, bodyLimit, searchMaxBytes int64) *ServiceTarget {
	t.Helper()
	return &ServiceTarget{
		Target:    servicetest.Target[struct{}]{Instance: servicetest.Start(t, build, cfg)},
		bodyLimit: bodyLimit, searchMaxBytes: searchMaxBytes,
	}
}

// BodyLimit implements Target.
func (tg *ServiceTarget) BodyLimit() int64 { return tg.bodyLimit }

// SearchMaxBytes implements Target.
func (tg *ServiceTarget) SearchMaxBytes() int64 { return tg.searchMaxBytes }
