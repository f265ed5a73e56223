package localport

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestFreeIsBindableAndOutsideTheEphemeralRange picks many ports and
// binds each: every one is in the band and below the kernel's ephemeral
// range, where no outgoing connection takes it.
func TestFreeIsBindableAndOutsideTheEphemeralRange(t *testing.T) {
	t.Parallel()
	low, ok := ephemeralLow()
	if !ok {
		t.Skipf("no %s on this system: Free falls back to the kernel's pick", rangeFile)
	}
	for range 200 {
		port, err := Free()
		if err != nil {
			t.Fatal(err)
		}
		if port < bandLow || port >= bandHigh || port >= low {
			t.Fatalf("Free() = %d, want a port in %d-%d below the ephemeral range (from %d)", port, bandLow, bandHigh-1, low)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("Free() = %d, which cannot be bound: %v", port, err)
		}
		_ = ln.Close()
	}
}

// TestAddrIsLoopback checks Addr's form.
func TestAddrIsLoopback(t *testing.T) {
	t.Parallel()
	addr, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr() = %q (%v), want 127.0.0.1:<port>", addr, err)
	}
}

// TestNoStackPortIsInTheBand reads scripts/ports.env, the stack's ports,
// and fails if one of them, or RabbitMQ's Erlang distribution port
// (RABBITMQ_PORT+20000), falls in the band Free picks from: a port the
// stack restarts a server on must never be handed to a child.
func TestNoStackPortIsInTheBand(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../../scripts/ports.env")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ports := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		p, err := strconv.Atoi(value)
		if err != nil {
			t.Fatalf("ports.env: %s=%q is not a port", name, value)
		}
		ports[name] = p
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ports) < 5 {
		t.Fatalf("read %d ports from ports.env, want the stack's", len(ports))
	}
	if amqp, ok := ports["RABBITMQ_PORT"]; ok {
		ports["RABBITMQ_PORT+20000 (Erlang distribution)"] = amqp + 20000
	}
	for name, p := range ports {
		if p >= bandLow && p < bandHigh {
			t.Errorf("%s=%d is in the band %d-%d that Free picks from", name, p, bandLow, bandHigh-1)
		}
	}
}
