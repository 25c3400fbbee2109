package bench

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/podpatch/podpatch/test/cluster"
)

// Server is a webhook server process on loopback: podpatch or a reference.
type Server struct {
	Name  string
	Port  int
	cmd   *exec.Cmd
	out   *os.File
	done  chan error
	ports []*cluster.HeldPort // released once it has stopped
}

// StartServer runs bin with args, appending --host 127.0.0.1 --port PORT --cert-dir certDir
// --permit-port-sharing on a loopback port held for it (cluster.HoldPort), sends its output to
// logFile, and waits until ready returns nil (polled every 10 ms, 60 s at most). held are the
// other ports args name (metrics, probes), held by the caller for it: released with the
// server's own when it stops.
func StartServer(name, bin, certDir, logFile string, ready func(*Server) error, held []*cluster.HeldPort, args ...string) (*Server, error) {
	port, err := cluster.HoldPort()
	if err != nil {
		return nil, errors.Join(err, cluster.ReleaseAll(held))
	}
	held = append(held, port)
	out, err := os.Create(logFile)
	if err != nil {
		return nil, errors.Join(err, cluster.ReleaseAll(held))
	}
	s := &Server{Name: name, Port: port.Port, out: out, done: make(chan error, 1), ports: held}
	args = append(args, "--host", "127.0.0.1", "--port", strconv.Itoa(port.Port), "--cert-dir", certDir, "--permit-port-sharing")
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		out.Close()
		return nil, errors.Join(err, cluster.ReleaseAll(held))
	}
	go func() { s.done <- s.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-s.done:
			out.Close()
			return nil, fmt.Errorf("%s exited before it was ready (%v); see %s", name, err, logFile)
		default:
		}
		err := ready(s)
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(fmt.Errorf("%s not ready after 60s: %w; see %s", name, err, logFile), s.Stop())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// PID is the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// URL is the server's /mutate endpoint on loopback (TLSClient names the certificate's host).
func (s *Server) URL() string { return fmt.Sprintf("https://127.0.0.1:%d/mutate", s.Port) }

// BaseURL is the server's address as the API server reaches it (a host the certificate names).
func (s *Server) BaseURL() string { return fmt.Sprintf("https://localhost:%d", s.Port) }

// Stop sends SIGTERM and waits for the process to exit.
func (s *Server) Stop() error {
	defer s.out.Close()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-s.done:
		return errors.Join(err, cluster.ReleaseAll(s.ports))
	case <-time.After(30 * time.Second):
		return errors.Join(fmt.Errorf("%s did not stop on SIGTERM", s.Name), s.cmd.Process.Kill())
	}
}

// ProcStats are what /proc says about a process.
type ProcStats struct {
	CPU time.Duration // user + system time so far
	// RSS and PeakRSS (VmRSS, VmHWM) in bytes.
	RSS, PeakRSS int64
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every Linux architecture
// Go supports.
const clockTick = 10 * time.Millisecond

// ReadProcStats reads /proc/<pid>/stat and /proc/<pid>/status.
func ReadProcStats(pid int) (ProcStats, error) {
	var st ProcStats
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return st, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return st, errors.New("short /proc stat")
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return st, err
	}
	st.CPU = time.Duration(utime+stime) * clockTick
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var into *int64
		switch k {
		case "VmRSS":
			into = &st.RSS
		case "VmHWM":
			into = &st.PeakRSS
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return st, fmt.Errorf("%s: %w", k, err)
		}
		*into = kb << 10
	}
	return st, nil
}

// ResetPeakRSS resets VmHWM to the current RSS (clear_refs 5), so a run's peak is its own.
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// TLSClient trusts the CA in certDir/ca.crt and talks HTTP/1.1 with keep-alive to the host
// the certificate names, as the API server does.
func TLSClient(certDir string) (*tls.Config, error) {
	ca, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("no CA certificate in ca.crt")
	}
	return &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}

// Post sends one AdmissionReview to a server's /mutate and returns the body of a 200 answer.
func Post(c *http.Client, url string, review []byte) ([]byte, error) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(review))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return body, nil
}

// MachineBusy is the CPU time every CPU of the machine has spent busy so far (/proc/stat: all
// but idle and iowait).
func MachineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, errors.New("malformed /proc/stat")
	}
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is counted in user time already
			break
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		busy += n
	}
	return time.Duration(busy) * clockTick, nil
}
