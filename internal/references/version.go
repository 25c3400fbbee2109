package references

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"

	"github.com/podpatch/podpatch/policies/versions"
)

// serverVersion follows the API server's version, asked through discovery at start
// and every versionInterval, for the engine's versions.Server: an upgrade of the control plane
// is seen within the interval.
type serverVersion struct {
	discovery discovery.ServerVersionInterface
	known     atomic.Pointer[versions.Version]
	// follow, if set, is called on run's goroutine with each version discovery reports that
	// podpatch supports, changed when it is a new one (the first, an upgrade, a patch release,
	// another emulated version): the field probe learns what that server keeps (probe.go).
	follow func(ctx context.Context, v versions.Version, changed bool)
}

// versionInterval is how often the API server's version is asked for.
const versionInterval = time.Minute

// ServerVersionOf is the version an API server's /version says it serves: its emulated
// version under --emulated-version (the binary's stays in Major and Minor).
func ServerVersionOf(info *version.Info) (versions.Version, error) {
	minor := info.Minor
	if info.EmulationMinor != "" {
		minor = info.EmulationMinor
	}
	major := info.Major
	if info.EmulationMajor != "" {
		major = info.EmulationMajor
	}
	return versions.Parse(major + "." + minor)
}

// run asks for the version until ctx is done.
func (s *serverVersion) run(ctx context.Context) {
	t := time.NewTicker(versionInterval)
	defer t.Stop()
	seen := ""
	for {
		seen = s.ask(ctx, seen)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ask asks for the version once and returns what it saw (the binary's and the emulated
// version), calling follow, changed when that differs from seen. A failed ask keeps what was
// known.
func (s *serverVersion) ask(ctx context.Context, seen string) string {
	info, err := s.discovery.ServerVersion()
	if err != nil {
		return seen
	}
	v, err := ServerVersionOf(info)
	if err != nil {
		return seen
	}
	s.known.Store(&v)
	now := info.GitVersion + " " + v.String()
	if s.follow != nil { // a version podpatch does not support too: the probe is all it knows of it
		s.follow(ctx, v, now != seen)
	}
	return now
}

// KubeVersion implements versions.Server.
func (s *serverVersion) KubeVersion() (versions.Version, bool) {
	if v := s.known.Load(); v != nil {
		return *v, true
	}
	return versions.Version{}, false
}
