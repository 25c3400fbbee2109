package lint

import (
	"fmt"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/versions"
)

// VersionEffects lists, one line each (`REF: FIELD: …`), the fields the set's policies set that
// Kubernetes v does not keep (versions.Fields): dropped ones have no effect there,
// refused ones make every object the policy matches refused. refused counts the latter.
func VersionEffects(s *policies.Set, v versions.Version) (lines []string, refused int) {
	scopes := [][]*policies.Policy{s.Policies(policies.ScopePlatform, "")}
	for _, ns := range s.Namespaces() {
		scopes = append(scopes, s.Policies(policies.ScopeNamespace, ns))
	}
	for _, ps := range scopes {
		for _, p := range ps {
			for _, kind := range []profiles.Kind{profiles.KindPod, profiles.KindService} {
				prefix := ""
				if kind == profiles.KindService {
					prefix = "service."
				}
				for _, e := range versions.Affected(string(kind), p.Patch(kind), v) {
					lines = append(lines, fmt.Sprintf("%s: %s%s: %s", p.Ref, prefix, e.At, e.String(v)))
					if e.Outcome == versions.Refused {
						refused++
					}
				}
			}
		}
	}
	return lines, refused
}
