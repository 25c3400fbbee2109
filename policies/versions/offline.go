package versions

// At is a version given on the command line (--kube-version): it answers Server, for the
// offline commands' lookups.
type At Version

// KubeVersion implements Server.
func (a At) KubeVersion() (Version, bool) { return Version(a), true }
