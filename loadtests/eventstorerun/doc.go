// Package eventstorerun runs the event store's part of the load driver
// end to end on the driver's environment (scenario.Env): it starts the
// trio's services the driver can start (Services), gives kafka-eventstore
// a fresh topic and starts the keyed design beside it, starts
// no-kurrentdb on private servers of other PostgreSQL versions
// (Compare), then runs the bench's scenarios, the long streams and
// cleanup, and the causal point-read experiment in that order (Results),
// the demo's short append bench (Demo), or the append ceiling search
// (Ceiling). Package eventstore holds the bench itself; package cli
// holds the commands that call this one.
package eventstorerun
