// Package localport picks loopback TCP ports for a process that is started
// later to listen on: the load driver's and the tests' child services,
// brokers and database nodes.
//
// The usual trick, listening on port 0 and closing the listener again,
// hands out a port from the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default). That
// is the range every outgoing connection takes its source port from, so
// between the pick and the child's bind any connect() on the machine may
// take the port, and under a parallel `go test ./...` one does: a child
// then fails with "address already in use". Free picks below the
// ephemeral range instead, in a band no stack server uses, at random so
// that parallel test processes rarely pick the same port, and checks that
// nothing listens there now. A port is still only free at the moment of
// the pick; the band makes the remaining race one between processes that
// pick ports, not with every connection on the machine.
package localport
