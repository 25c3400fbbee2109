package reference

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Main is the main function of a reference server binary: it parses the flags
// podpatch serve has for the same things (--host, --port, --cert-dir,
// --metrics-bind-address, --permit-port-sharing), logs JSON at info level as podpatch does, and serves until SIGTERM.
func Main(name string, handler admission.Handler) {
	o := Options{Port: 9443}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.StringVar(&o.Host, "host", o.Host, "address the webhook listens on (empty: all)")
	fs.IntVar(&o.Port, "port", o.Port, "HTTPS port of the webhook")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "directory holding tls.crt and tls.key")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address of /metrics (empty disables)")
	fs.BoolVar(&o.PermitPortSharing, "permit-port-sharing", o.PermitPortSharing, "bind with SO_REUSEPORT, as podpatch serve's flag")
	if err := fs.Parse(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := Serve(ctx, o, handler); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
