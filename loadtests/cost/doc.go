// Package cost measures what a load costs the machine: the CPU time of
// every process involved (Postgres and its children, RabbitMQ's beam.smp,
// Kafka's JVM, FerretDB, redis-server, a service), read from
// /proc/<pid>/stat before and after a measurement. It is Linux only;
// elsewhere every lookup reports that it found nothing.
//
// A Group is one or more root processes and all their descendants. Its
// CPU time is each root's utime+stime+cutime+cstime plus the utime+stime of
// its living descendants, so a child that exits between two samples (a
// Postgres backend that disconnects) is still counted: its CPU moves to its
// parent's cutime/cstime when the parent reaps it. A child that starts
// between two samples counts from zero. Differences of two Samples are
// therefore the CPU the group used in between.
//
// The finders locate the stack's servers robustly: the pid files the
// stack writes (.stack/pg/postmaster.pid, .stack/rabbitmq/rabbitmq.pid,
// .stack/kafka/kafka.pid, .stack/ferretdb/ferretdb.pid,
// .stack/redis/redis.pid), then a scan of /proc by command name;
// ListenerPID finds the process listening on a TCP port (a service the
// driver did not start).
//
//	set := cost.Set{cost.Postgres(".stack", backendPID), cost.RabbitMQ(".stack"),
//		cost.Process("rabbitmq", launchedPID, 8082)}
//	before := set.Sample()
//	... load ...
//	used := set.Sample().Sub(before) // CPU-seconds per group name
//	perK := cost.PerThousand(used["postgres"], items)
package cost
