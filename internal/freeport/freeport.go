// Package freeport picks a TCP port on 127.0.0.1 for a process that is started next and binds
// it itself: the port is free when picked, and drawn outside the kernel's range for outgoing
// connections. A port from that range (what binding port 0 gives) can become the local end of
// any process's outgoing connection between the pick and the bind, and the process then dies on
// "address already in use".
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
)

// Pick returns a port on 127.0.0.1 that was free a moment ago, outside the ephemeral range.
func Pick() (int, error) {
	low, high := outsideEphemeral()
	var err error
	for range 100 {
		port := low + rand.IntN(high-low)
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
			continue
		}
		return port, l.Close()
	}
	return 0, fmt.Errorf("no free port on 127.0.0.1 in [%d, %d): %w", low, high, err)
}

// ephemeralRange is the kernel's range for outgoing connections (net.ipv4.ip_local_port_range),
// or Linux's default when it cannot be read.
func ephemeralRange() (start, end int) {
	start, end = 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var s, e int
		if _, err := fmt.Sscan(string(b), &s, &e); err == nil && s <= e {
			start, end = s, e
		}
	}
	return start, end
}

// outsideEphemeral is a range [low, high) of at least 10,000 ports below or above
// ephemeralRange.
func outsideEphemeral() (low, high int) {
	start, end := ephemeralRange()
	switch {
	case start >= 20000:
		return 10000, start
	case end <= 55535:
		return end + 1, 65536
	default:
		return 10000, 20000 // the whole range is ephemeral; the bind check alone then guards
	}
}
