package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/certs"
)

// certsOptions are the flags of `podpatch certs`.
type certsOptions struct {
	Service   string
	Namespace string
	Out       string
	Validity  time.Duration
}

func (o *certsOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Service, "service", "", "name of the webhook's Service (required)")
	fs.StringVar(&o.Namespace, "namespace", "", "namespace of the webhook's Service (required)")
	fs.StringVar(&o.Out, "out", "", "directory to write ca.crt, tls.crt and tls.key to (required)")
	fs.DurationVar(&o.Validity, "validity", certs.DefaultCAValidity, "lifetime of the CA and of the serving certificate")
}

func (o *certsOptions) Validate() error {
	var missing []string
	for _, f := range []struct{ flag, value string }{{"--service", o.Service}, {"--namespace", o.Namespace}, {"--out", o.Out}} {
		if f.value == "" {
			missing = append(missing, f.flag)
		}
	}
	if len(missing) > 0 {
		return usageError{fmt.Errorf("required flag(s) %s not set", strings.Join(missing, ", "))}
	}
	if o.Validity <= 0 {
		return usageError{fmt.Errorf("--validity must be positive, not %s", o.Validity)}
	}
	if err := o.generateOptions().Validate(); err != nil {
		return usageError{err}
	}
	return nil
}

func (o *certsOptions) generateOptions() certs.GenerateOptions {
	return certs.GenerateOptions{Service: o.Service, Namespace: o.Namespace, CAValidity: o.Validity, CertValidity: o.Validity}
}

// runCerts writes a new CA and a serving certificate for the webhook's Service
// to a directory, for installs that manage certificates themselves.
func runCerts(args []string, stdout, stderr io.Writer) error {
	o := &certsOptions{}
	if _, err := parseCommand("certs", args, stderr, false, o); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	b, err := certs.Generate(o.generateOptions())
	if err != nil {
		return err
	}
	if err := certs.WriteFiles(o.Out, b); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "wrote %s, %s and %s to %s for %s.%s.svc, valid for %s\n",
		certs.CACertFile, certs.CertFile, certs.KeyFile, filepath.Clean(o.Out), o.Service, o.Namespace, o.Validity)
	return err
}
