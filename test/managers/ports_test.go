package managers

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/test/cluster"
)

// The managers' ports, without races (test/cluster/ports.go says why a port picked by binding
// port 0 and closing the socket is not one): a listener the test never reads is turned off, or
// left to the manager to bind on port 0 when the test learns the number another way; a Python
// manager shares a port the test holds (startSharing); Kueue, which can neither bind port 0 nor
// share, listens on a port below the ephemeral range (startOnFixedPort).

const (
	// sharedPortsEnv names the ports testdata/portsharing/sitecustomize.py binds with SO_REUSEPORT.
	sharedPortsEnv = "PODPATCH_SHARED_PORTS"
	// sharedBindLine is what the shim writes when it binds one of them (with host:port).
	sharedBindLine = "podpatch-portsharing: bind %s with SO_REUSEPORT"
	// fixedPortsFrom is the lowest port startOnFixedPort picks: above the ports of most
	// well-known services (1024, the lowest unprivileged port, if the ephemeral range starts below).
	fixedPortsFrom = 20000
	// fixedPortTries is how many ports startOnFixedPort tries before it gives up.
	fixedPortTries = 5
)

// holdPort holds a loopback port for a process the test starts next, and releases it when the
// test ends, after that process is killed (cleanups run last registered first).
func holdPort(t *testing.T) *cluster.HeldPort {
	t.Helper()
	h, err := cluster.HoldPort()
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := h.Release(); err != nil {
			t.Errorf("release port %d: %v", h.Port, err)
		}
	})
	return h
}

// startSharing starts a Python program of the virtualenv that listens on the held ports: with
// testdata/portsharing first on its PYTHONPATH, whose sitecustomize sets SO_REUSEPORT on its
// sockets binding them. It waits until the program has bound each one so, and fails the test if
// it exits first.
func (h *harness) startSharing(t *testing.T, name string, cmd *exec.Cmd, held ...*cluster.HeldPort) *process {
	t.Helper()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	// Python imports the first sitecustomize on its path only: the shim's would hide one the
	// virtualenv had.
	out, err := exec.Command(filepath.Join(h.needVenv(t), "bin", "python"), "-c",
		"import importlib.util as u; s = u.find_spec('sitecustomize'); print(s.origin if s else '')").Output()
	require.NoError(t, err, "python: find sitecustomize")
	require.Empty(t, string(trimNewline(out)), "the virtualenv has a sitecustomize of its own, which testdata/portsharing's would hide")
	shim := filepath.Join(h.root, "test", "managers", "testdata", "portsharing")
	pythonPath := shim
	for _, kv := range cmd.Env { // the last one counts
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			pythonPath = shim
			if v != "" {
				pythonPath += string(os.PathListSeparator) + v
			}
		}
	}
	ports := make([]string, len(held))
	for i, hp := range held {
		ports[i] = strconv.Itoa(hp.Port)
	}
	cmd.Env = append(cmd.Env, "PYTHONPATH="+pythonPath, sharedPortsEnv+"="+strings.Join(ports, ","))
	p := start(t, name, cmd)
	for _, hp := range held {
		line := fmt.Sprintf(sharedBindLine, hp.Addr())
		eventually(t, time.Minute, func() error {
			if strings.Contains(p.output(), line) {
				return nil
			}
			select {
			case <-p.exited:
				t.Fatalf("%s exited (%v) before it bound %s with SO_REUSEPORT:\n%s", name, p.err, hp.Addr(), tail(p.output(), 6000))
			default:
			}
			return fmt.Errorf("no %q in its output", line)
		}, "%s binds %s with SO_REUSEPORT", name, hp.Addr())
	}
	return p
}

// startOnFixedPort starts a program that must listen on a port the test names but can neither
// pick it itself nor share it (Kueue's webhook server): on a port below the ephemeral range, which
// the kernel never hands to a bind of port 0, picked at random. It waits for the line the program
// writes once it listens; if the program exits saying the port is in use (taken by another
// process), it starts again on another port, a few times.
func startOnFixedPort(t *testing.T, name, listening string, cmd func(port int) *exec.Cmd) (*process, int) {
	t.Helper()
	tried := map[int]bool{}
	for len(tried) < fixedPortTries {
		port, err := portBelowEphemeral()
		require.NoError(t, err)
		if tried[port] {
			continue
		}
		tried[port] = true
		p := start(t, name, cmd(port))
		inUse := false
		eventually(t, 2*time.Minute, func() error {
			out := p.output()
			if strings.Contains(out, listening) {
				return nil
			}
			select {
			case <-p.exited:
				if !strings.Contains(out, "address already in use") {
					t.Fatalf("%s exited (%v) before it listened on port %d:\n%s", name, p.err, port, tail(out, 6000))
				}
				inUse = true
				return nil
			default:
			}
			return fmt.Errorf("no %q in its output", listening)
		}, "%s listens on port %d", name, port)
		if !inUse {
			return p, port
		}
		t.Logf("%s: port %d in use, trying another", name, port)
	}
	t.Fatalf("%s: ports %v all in use", name, tried)
	return nil, 0
}

// portBelowEphemeral is a random port from fixedPortsFrom up to the ephemeral range's first port
// (/proc/sys/net/ipv4/ip_local_port_range), excluded.
func portBelowEphemeral() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, fmt.Errorf("ephemeral port range: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, fmt.Errorf("ephemeral port range: %q", b)
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, fmt.Errorf("ephemeral port range: %w", err)
	}
	from := fixedPortsFrom
	if low <= from {
		from = 1024
	}
	if low <= from {
		return 0, fmt.Errorf("the ephemeral port range starts at %d: no unprivileged port below it", low)
	}
	return from + rand.IntN(low-from), nil
}
