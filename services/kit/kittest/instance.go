package kittest

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// Target is what every pair's conformance Target starts with (each
// contract/<pair>/conformance package adds the pair's extras): the running
// instance's address and the two ways to replace it.
type Target interface {
	// URL is the running instance's base URL; it changes on Restart and
	// Crash.
	URL() string
	// Restart stops the instance gracefully (HTTP drain, then the
	// service's stop hooks) and starts a new one on the same backend
	// state (schema, queue, topic, database).
	Restart(t testing.TB)
	// Crash stops the instance as a crash would, leaving unconfirmed
	// whatever the side's crash leaves unconfirmed (each pair's
	// conformance package says what that is), then starts a new one on
	// the same backend state.
	Crash(t testing.TB)
}

// Instance runs one in-process instance of a service at a time, so that
// a test target can stop it and start a new one on the same backend
// state. A is whatever build returns besides the service (the assembled
// app, its queue or its store), for a target's Crash and a service's own
// tests to reach into. Its methods are called from the test goroutine.
//
// Instance implements URL and Restart of Target; a service's target
// embeds it and adds Crash.
type Instance[A any] struct {
	// Ready, when set, is called after each start and waits until the new
	// instance is ready for the test (a consumer streaming, say).
	Ready func(t testing.TB, app A)

	build func(t testing.TB) (A, *service.Service)
	app   A
	url   string
	stop  func() // nil when no instance runs
}

// NewInstance returns an Instance that builds each new instance with
// build, without starting one (set Ready, then call Start). build reads
// the settings the target holds at that moment and fails the test if the
// service cannot be built.
func NewInstance[A any](build func(t testing.TB) (A, *service.Service)) *Instance[A] {
	return &Instance[A]{build: build}
}

// StartInstance is NewInstance, then Start.
func StartInstance[A any](t testing.TB, build func(t testing.TB) (A, *service.Service)) *Instance[A] {
	t.Helper()
	in := NewInstance(build)
	in.Start(t)
	return in
}

// URL is the running instance's base URL.
func (in *Instance[A]) URL() string { return in.url }

// App is what build returned with the running (or last) instance.
func (in *Instance[A]) App() A { return in.app }

// Start builds and starts a new instance, stopping the running one first
// if there is one. The instance is stopped when the test that started it
// ends.
func (in *Instance[A]) Start(t testing.TB) {
	t.Helper()
	in.Stop()
	app, svc := in.build(t)
	in.app = app
	in.url, in.stop = Start(t, svc)
	if in.Ready != nil {
		in.Ready(t, app)
	}
}

// Stop stops the running instance gracefully, as a signal would, and
// waits for it. It does nothing when no instance runs.
func (in *Instance[A]) Stop() {
	if in.stop != nil {
		in.stop()
		in.stop = nil
	}
}

// Restart is Stop, then Start.
func (in *Instance[A]) Restart(t testing.TB) {
	t.Helper()
	in.Stop()
	in.Start(t)
}
