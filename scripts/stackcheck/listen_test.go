package stackcheck

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Ports of the stack outside scripts/ports.env: RabbitMQ's Erlang port
// mapper and distribution port (stack.sh binds both to 127.0.0.1).
const (
	epmdPort = 4369
	// rabbitDistOffset: stack.sh's RABBITMQ_DIST_PORT is RABBITMQ_PORT
	// plus this (RabbitMQ's own default).
	rabbitDistOffset = 20000
)

// listener is one listening TCP socket of /proc/net/tcp{,6}.
type listener struct {
	addr net.IP
	port int
}

func (l listener) String() string { return net.JoinHostPort(l.addr.String(), strconv.Itoa(l.port)) }

// TestStackListensOnLoopbackOnly reads the machine's listening TCP
// sockets (/proc/net/tcp and tcp6, what `ss -ltn` shows) and fails on any
// port of the stack or of the services listening on an address other than
// loopback: every scripts/ports.env port, epmd (4369), RabbitMQ's
// distribution port (RABBITMQ_PORT+20000) and the services' HTTP ports.
// It skips when no stack port listens at all (the stack is down); run it
// after `make up`.
func TestStackListensOnLoopbackOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("checks the running stack")
	}
	t.Parallel()
	ls, err := listeners()
	if err != nil {
		t.Skipf("cannot read the listening sockets (%v): not Linux, or no /proc", err)
	}
	watched := map[int]string{epmdPort: "epmd"}
	for k, p := range readPortsEnv(t) {
		watched[p] = k
	}
	if p, ok := readPortsEnv(t)["RABBITMQ_PORT"]; ok {
		watched[p+rabbitDistOffset] = "RabbitMQ's Erlang distribution port (RABBITMQ_PORT+20000)"
	}
	for _, s := range pairs.All {
		if !s.Planned {
			watched[s.Port] = s.Name + " (service)"
		}
	}
	up := 0
	var bad []string
	for _, l := range ls {
		name, ok := watched[l.port]
		if !ok {
			continue
		}
		up++
		if !l.addr.IsLoopback() {
			bad = append(bad, fmt.Sprintf("%s listens on %s", name, l))
		}
	}
	if up == 0 {
		t.Skip("no port of the stack or the services is listening: the stack is not up (make up)")
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s, not loopback only (scripts/stack.sh binds the stack to 127.0.0.1; a stack started by an older stack.sh must be restarted)", b)
	}
}

// listeners returns the listening TCP sockets of /proc/net/tcp and tcp6.
func listeners() ([]listener, error) {
	var out []listener
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		ls, err := readProcNet(f)
		if err != nil {
			return nil, err
		}
		out = append(out, ls...)
	}
	return out, nil
}

// tcpListen is the LISTEN state in /proc/net/tcp.
const tcpListen = "0A"

func readProcNet(path string) ([]listener, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []listener
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != tcpListen {
			continue
		}
		l, err := parseProcAddr(fields[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// parseProcAddr parses a local_address of /proc/net/tcp{,6}: hex address
// (32-bit words in host byte order, little-endian here), colon, hex port.
func parseProcAddr(s string) (listener, error) {
	a, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	raw, err2 := hex.DecodeString(a)
	if !ok || err != nil || err2 != nil || (len(raw) != 4 && len(raw) != 16) {
		return listener{}, fmt.Errorf("not an address: %q", s)
	}
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		for i := range 4 {
			ip[w+i] = raw[w+3-i]
		}
	}
	return listener{addr: ip, port: int(port)}, nil
}

func TestParseProcAddr(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"0100007F:1538":                         "127.0.0.1:5432",
		"00000000:1131":                         "0.0.0.0:4401",
		"00000000000000000000000001000000:1111": "[::1]:4369",
		"00000000000000000000000000000000:6468": "[::]:25704",
		"0000000000000000FFFF00000100007F:2384": "127.0.0.1:9092", // ::ffff:127.0.0.1
	}
	for in, want := range cases {
		l, err := parseProcAddr(in)
		if err != nil || l.String() != want {
			t.Errorf("parseProcAddr(%s) = %v (%v), want %s", in, l, err, want)
		}
	}
	for in, loop := range map[string]bool{"0100007F:1538": true, "00000000:1131": false,
		"00000000000000000000000001000000:1111": true, "0000000000000000FFFF00000100007F:2384": true,
		"00000000000000000000000000000000:6468": false} {
		if l, _ := parseProcAddr(in); l.addr.IsLoopback() != loop {
			t.Errorf("%s loopback = %v, want %v", in, !loop, loop)
		}
	}
}
