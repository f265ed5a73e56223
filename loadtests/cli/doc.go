// Package cli is the load driver's command line, as rivercli is River's:
// cli.go holds its one command table (each command's name, usage line
// and main; Run dispatches on it, usage lists it) and check.go the check
// command. ../doc.go shows every command with its flags.
//
// registry.go's loadPairs is the project's pair table, where a pair is
// registered once: its part of the load driver (its command, flags,
// options and scenario) and its report.Pair, which init hands to
// report.Use; commands.go holds loadTable, one
// small function per load command, with throughput.go, longlived.go,
// scaleout.go, durability.go, extras.go, experiments.go,
// eventstore_long.go, causal.go, fuzz.go and publish.go beside it;
// ceilings.go holds the ceiling searches' shared flags and the
// eventstore-ceiling command (also a results step after the event
// store's bench); the event store's orchestration (its services, topics,
// other PostgreSQL versions and the order of its parts) is package
// eventstorerun's, which the eventstore commands and results call;
// cache_roles_flags.go holds the cache pair's flags of the roles beyond
// the cache (scenario.CacheRoles); extras.go adds the overload points,
// the log pair at its batch throughput and the raw limits to queue, log
// and results, and publish.go is the results command's last step, which
// fails it when a point failed (unless -publish-failed). Metrics are
// named by package driver's constants (driver.ServerDeliveryP99, ...),
// services by kit/pairs'. registry_test.go keeps every pair driven and
// reported; doc_test.go checks that ../doc.go's usage lines name every
// command of the table and no other, and that this comment names every
// file of the package, and no other.
package cli
