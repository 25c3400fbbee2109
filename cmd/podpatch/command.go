package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/internal/references"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/render"
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

// parseKubeVersion reads a --kube-version flag: a supported Kubernetes version, or a
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

// kubeVersionFlag is the help of --kube-version for the commands that read a cluster.
var kubeVersionFlag = fmt.Sprintf("Kubernetes version to check policy fields for (1.%d to 1.%d): the fields it drops are reported, those it refuses leave the policy out (default: the cluster's, read by discovery)", versions.OldestMinor, versions.NewestMinor)

// optionalKubeVersion reads a --kube-version flag that may be empty (nil: the cluster's).
func optionalKubeVersion(flag string) (*versions.Version, error) {
	if flag == "" {
		return nil, nil
	}
	v, err := parseKubeVersion(flag)
	return &v, err
}

// pinnedVersion is the cluster's lookups answering --kube-version in place of the version
// discovery gives; every other lookup is the cluster's.
type pinnedVersion struct {
	*references.Caches
	v versions.Version
}

// KubeVersion implements versions.Server.
func (p pinnedVersion) KubeVersion() (versions.Version, bool) { return p.v, true }

// lookupsAt is the cluster's lookups (nil: none) with Kubernetes v in place of the cluster's
// version, or as they are when v is nil.
func lookupsAt(l validity.Lookups, v *versions.Version) validity.Lookups {
	if v == nil {
		return l
	}
	if c, ok := l.(*references.Caches); ok {
		return pinnedVersion{c, *v}
	}
	return render.VersionOnly(*v)
}

// warnKubeVersion says which Kubernetes version policy fields are checked for, when the
// lookups know none or one podpatch does not support.
func warnKubeVersion(l validity.Lookups, warn func(string)) {
	s, ok := l.(versions.Server)
	if !ok {
		warn("the cluster's Kubernetes version is unknown: no version's fields are checked (--kube-version sets one)")
		return
	}
	switch v, known := s.KubeVersion(); {
	case !known:
		warn("the cluster's Kubernetes version is unknown: no version's fields are checked (--kube-version sets one)")
	case !v.Supported():
		warn(fmt.Sprintf("the cluster runs Kubernetes %s; podpatch supports 1.%d to 1.%d: no version's fields are checked (--kube-version sets one)", v, versions.OldestMinor, versions.NewestMinor))
	}
}
