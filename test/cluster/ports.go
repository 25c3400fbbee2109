package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"

	"github.com/podpatch/podpatch/webhook"
)

// Ports without races. A port picked by binding port 0, reading the number and closing the
// socket is free only at that instant: the kernel may hand the same number to the next bind
// of port 0 (this process's or any other's) before the process meant to listen on it does.
// Instead the harness holds every port it hands out for as long as it is in use: a loopback
// socket bound with SO_REUSEPORT that never listens, so it receives no connection, while the
// process given the port binds it with SO_REUSEPORT too (kube-apiserver, kube-controller-manager
// and kube-scheduler with --permit-port-sharing, etcd with --socket-reuse-port, podpatch serve
// with --permit-port-sharing). Linux lets only sockets of the same user that all set
// SO_REUSEPORT share a port, and never gives a held port to a bind of port 0, so nothing else
// can take it: not before the process starts, not between a stop and a restart on the same
// port.

// soReusePort is SO_REUSEPORT on Linux (the syscall package does not name it).
const soReusePort = 0xf

// HeldPort is a loopback TCP port this process holds for another to listen on with port
// sharing. Release it when that process is gone.
type HeldPort struct {
	Port int
	mu   sync.Mutex
	fd   int // -1 once released
}

// HoldPort binds a new loopback port and holds it.
func HoldPort() (*HeldPort, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hold a port: %w", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, soReusePort, 1); err != nil {
		return nil, errors.Join(fmt.Errorf("hold a port: SO_REUSEPORT: %w", err), syscall.Close(fd))
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return nil, errors.Join(fmt.Errorf("hold a port: bind: %w", err), syscall.Close(fd))
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("hold a port: %w", err), syscall.Close(fd))
	}
	return &HeldPort{Port: sa.(*syscall.SockaddrInet4).Port, fd: fd}, nil
}

// HoldPorts holds n ports, or none if one cannot be held.
func HoldPorts(n int) ([]*HeldPort, error) {
	held := make([]*HeldPort, 0, n)
	for range n {
		h, err := HoldPort()
		if err != nil {
			return nil, errors.Join(err, ReleaseAll(held))
		}
		held = append(held, h)
	}
	return held, nil
}

// Addr is the held port's loopback address, host:port.
func (h *HeldPort) Addr() string { return fmt.Sprintf("127.0.0.1:%d", h.Port) }

// Release gives the port back; a second call does nothing.
func (h *HeldPort) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fd < 0 {
		return nil
	}
	err := syscall.Close(h.fd)
	h.fd = -1
	return err
}

// ReleaseAll releases every held port.
func ReleaseAll(held []*HeldPort) error {
	var errs []error
	for _, h := range held {
		errs = append(errs, h.Release())
	}
	return errors.Join(errs...)
}

// Listen listens on the held port itself, with port sharing: a listener of the harness's own
// that may be closed and opened again on the same port while the port stays held (a proxy the
// test cuts and heals).
func (h *HeldPort) Listen(ctx context.Context) (net.Listener, error) {
	return webhook.Listener(true)(ctx, h.Addr())
}
