package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/policies/versions"
)

// What every command shares: its flag parsing and the errors that set the exit status. Nothing
// here names a command, so each command's file depends on this one and on none of the others.

// usageError is bad command-line use: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }

// exitError carries an exit status without a message of its own (it has been printed).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// parseCommand parses a command's flags into its options; bad flags, and positional arguments
// for a command that takes none, are usage errors. It returns the positional arguments.
func parseCommand(name string, args []string, stderr io.Writer, positional bool, opts ...interface{ AddFlags(*pflag.FlagSet) }) ([]string, error) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	for _, o := range opts {
		o.AddFlags(fs)
	}
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if !positional && fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments %s", strings.Join(fs.Args(), " "))}
	}
	return fs.Args(), nil
}

// parseKubeVersion reads a --kube-version flag: a supported Kubernetes version (issue 34), or a
// usage error naming the supported ones.
func parseKubeVersion(flag string) (versions.Version, error) {
	v, err := versions.Parse(flag)
	if err != nil {
		return v, usageError{err}
	}
	if !v.Supported() {
		return v, usageError{fmt.Errorf("--kube-version %s: podpatch supports Kubernetes 1.%d to 1.%d", v, versions.OldestMinor, versions.NewestMinor)}
	}
	return v, nil
}
