package freeport

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
)

// A picked port is free and outside the range the kernel hands out for outgoing connections,
// which could take it before the process it is meant for binds it.
func TestPickIsFreeAndOutsideTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatal(err)
	}
	var start, end int
	if _, err := fmt.Sscan(string(b), &start, &end); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		port, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		if start >= 20000 && port >= start && port <= end {
			t.Fatalf("Pick() = %d, inside the ephemeral range %d-%d", port, start, end)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("Pick() = %d, not free: %v", port, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
