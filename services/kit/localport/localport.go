package localport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// The band Free picks from: above RabbitMQ's management port (15672) and
// below its Erlang distribution port (25672) and FerretDB's 27017, so no
// port of the stack (scripts/ports.env) is in it.
const (
	bandLow  = 16000
	bandHigh = 25000 // exclusive
)

// rangeFile holds the kernel's ephemeral port range, "low\thigh".
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// tries is how many random ports of the band Free checks before it
// gives up.
const tries = 64

// Free returns a TCP port on 127.0.0.1 that nothing listens on at the
// moment and that no outgoing connection will take as its source port:
// a port of the band outside the kernel's ephemeral range. When the
// ephemeral range covers the whole band (a machine configured so), it
// falls back to a port the kernel gives, as net.Listen on port 0 does.
// Free is safe for concurrent use.
func Free() (int, error) {
	high := bandHigh
	if low, ok := ephemeralLow(); ok && low < high {
		high = low
	}
	if high-bandLow < tries {
		return kernelPort()
	}
	var last error
	for range tries {
		port := bandLow + rand.IntN(high-bandLow)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			last = err
			continue
		}
		_ = ln.Close()
		return port, nil
	}
	return 0, fmt.Errorf("localport: no free port in %d-%d after %d tries: %w", bandLow, high-1, tries, last)
}

// Addr is Free as a loopback address, "127.0.0.1:port".
func Addr() (string, error) {
	port, err := Free()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// ephemeralLow reads the low end of the kernel's ephemeral range; ok is
// false where there is no such file (not Linux) or it cannot be read.
func ephemeralLow() (low int, ok bool) {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	low, err = strconv.Atoi(f[0])
	return low, err == nil
}

// kernelPort is the fallback: a port the kernel gives for port 0.
func kernelPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		return a.Port, nil
	}
	return 0, errors.New("localport: listener has no TCP address")
}
