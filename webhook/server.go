package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// DefaultShutdownTimeout is the default Grace: below a Pod's default 30 s termination grace.
const DefaultShutdownTimeout = 25 * time.Second

// Server serves the admission endpoints over TLS. It replaces controller-runtime's
// webhook.Server.Start, whose graceful shutdown waits a fixed minute (longer than a Pod's
// default 30 s termination grace, so the kubelet's SIGKILL would cut requests off) and whose
// requests inherit the server's context (so SIGTERM would cancel the requests it is meant to
// let finish). The handler is still that server's mux, which keeps controller-runtime's
// controller_runtime_webhook_* metrics; tls.crt and tls.key are reloaded by the same
// certwatcher.
type Server struct {
	Addr string
	// Listen opens the listener (Listener's; nil: net.Listen).
	Listen  ListenFunc
	CertDir string
	TLSOpts []func(*tls.Config)
	Handler http.Handler
	// Grace is how long in-flight requests may take once ctx is done.
	Grace time.Duration
	Log   logr.Logger

	started atomic.Bool
}

// Start serves until ctx is done, then stops accepting connections and waits at most Grace
// for the requests in flight; it returns an error if they did not finish.
func (s *Server) Start(ctx context.Context) error {
	cfg := &tls.Config{}
	for _, op := range s.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		cw, err := certwatcher.New(filepath.Join(s.CertDir, "tls.crt"), filepath.Join(s.CertDir, "tls.key"))
		if err != nil {
			return err
		}
		cfg.GetCertificate = cw.GetCertificate
		go func() {
			if err := cw.Start(ctx); err != nil {
				s.Log.Error(err, "certificate watcher stopped")
			}
		}()
	}
	ln, err := s.Listen.listen(ctx, s.Addr)
	if err != nil {
		return err
	}
	ln = tls.NewListener(ln, cfg)
	srv := &http.Server{
		Handler: s.Handler,
		// Headers are tiny in admission requests, and come with the TLS handshake in this
		// bound; a body has its own, short, read deadline (Review.read), and ReadTimeout is a
		// backstop for handlers that set none.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       90 * time.Second, // as http.DefaultTransport keeps connections
		MaxHeaderBytes:    64 << 10,
		// BaseContext is left alone: a request's context ends with the request, not with the
		// server, so that SIGTERM lets requests in flight finish.
	}
	done := make(chan error, 1)
	go func() {
		<-ctx.Done()
		s.Log.Info("shutting down the webhook server", "grace", s.Grace)
		sctx, cancel := context.WithTimeout(context.Background(), s.Grace)
		defer cancel()
		err := srv.Shutdown(sctx)
		if err != nil {
			err = fmt.Errorf("requests in flight did not finish within %s: %w", s.Grace, errors.Join(err, srv.Close()))
		}
		done <- err
	}()
	s.started.Store(true)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-done
}

// StartedChecker reports ready once the server accepts TLS connections.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("webhook server has not been started yet")
		}
		d := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", s.Addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reachability is checked
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}

// ListenFunc opens a TCP listener on addr.
type ListenFunc func(ctx context.Context, addr string) (net.Listener, error)

// Listener opens TCP listeners, with SO_REUSEPORT if shared: then another process of the same
// user that sets it too may bind the same port (kube-apiserver's --permit-port-sharing).
func Listener(shared bool) ListenFunc {
	lc := net.ListenConfig{}
	if shared {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soReusePort, 1)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	return func(ctx context.Context, addr string) (net.Listener, error) { return lc.Listen(ctx, "tcp", addr) }
}

// soReusePort is SO_REUSEPORT on Linux (the syscall package does not name it).
const soReusePort = 0xf

func (f ListenFunc) listen(ctx context.Context, addr string) (net.Listener, error) {
	if f == nil {
		f = Listener(false)
	}
	return f(ctx, addr)
}

// ServeHTTP returns a runnable serving h over plain HTTP on addr (the probes, the metrics),
// listening with listen (nil: net.Listen), until ctx is done, then shutting down within grace.
func ServeHTTP(listen ListenFunc, addr string, h http.Handler, grace time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		ln, err := listen.listen(ctx, addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		done := make(chan error, 1)
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			done <- srv.Shutdown(sctx)
		}()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return <-done
	}
}
