package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
)

// TestHeldPort: while a port is held nothing can bind it without port sharing, a listener with
// port sharing can and gets every connection (the held socket never listens), the port stays
// held when that listener closes, and it is free once released.
func TestHeldPort(t *testing.T) {
	h, err := HoldPort()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if h.Port == 0 {
		t.Fatal("no port")
	}
	if ln, err := net.Listen("tcp", h.Addr()); !errors.Is(err, syscall.EADDRINUSE) {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("a plain listener on a held port: %v, want EADDRINUSE", err)
	}
	for round := range 2 { // the same port again after the first listener closed
		ln, err := h.Listen(context.Background())
		if err != nil {
			t.Fatalf("round %d: a sharing listener on the held port: %v", round, err)
		}
		for i := range 20 {
			c, err := net.Dial("tcp", h.Addr())
			if err != nil {
				t.Fatalf("round %d, dial %d: %v", round, i, err)
			}
			s, err := ln.Accept() // every connection reaches the one listener
			if err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = s.Write([]byte("x")); s.Close() }()
			if b, err := io.ReadAll(c); err != nil || string(b) != "x" {
				t.Fatalf("round %d, dial %d: read %q, %v", round, i, b, err)
			}
			c.Close()
		}
		ln.Close()
		if c, err := net.Dial("tcp", h.Addr()); err == nil {
			c.Close()
			t.Fatalf("round %d: a held port with no listener accepted a connection", round)
		}
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(); err != nil {
		t.Fatalf("a second release: %v", err)
	}
	ln, err := net.Listen("tcp", h.Addr())
	if err != nil {
		t.Fatalf("a released port: %v", err)
	}
	ln.Close()
}

// TestHeldPortsDiffer: ports held at once are distinct, and none is given to a bind of port 0.
func TestHeldPortsDiffer(t *testing.T) {
	held, err := HoldPorts(50)
	if err != nil {
		t.Fatal(err)
	}
	defer ReleaseAll(held)
	seen := map[int]bool{}
	for _, h := range held {
		if seen[h.Port] {
			t.Fatalf("port %d held twice", h.Port)
		}
		seen[h.Port] = true
	}
	var open []net.Listener
	defer func() {
		for _, ln := range open {
			ln.Close()
		}
	}()
	for range 200 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, ln)
		if p := ln.Addr().(*net.TCPAddr).Port; seen[p] {
			t.Fatalf("a bind of port 0 was given held port %d", p)
		}
	}
}
