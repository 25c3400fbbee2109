package policies

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podpatch/podpatch/policies/profiles"
)

// TestNamespaceIndexSelectsAsTheBucket checks the platform's namespace index with generated
// policy sets: for every object, the policies selected through the index (the named policies of
// the object's namespace merged with those of any namespace) are exactly, and in the same
// order, those that a walk of the whole bucket matches — with literal names, globs, both in
// one policy, names listed twice, and objects in namespaces named by none.
func TestNamespaceIndexSelectsAsTheBucket(t *testing.T) {
	names := []string{"team-a", "team-b", "team-c", "ml", "ml-prod", "batch"}
	globs := []string{"team-*", "ml*", "?atch", "[tb]*"}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 27))
		var ps []*Policy
		for i := range 1 + r.IntN(40) {
			p := &Policy{Namespace: DefaultPlatformNamespace, ConfigMap: fmt.Sprintf("cm-%02d", r.IntN(10)), Key: "p.yaml",
				Index: i, Name: fmt.Sprintf("p%d", i), Scope: ScopePlatform, Priority: int32(r.IntN(3)),
				Mode: []Mode{ModeDefault, ModeMerge, ModeEnforce}[r.IntN(3)], template: &patchPart{raw: []byte(`{}`)}}
			p.Ref = p.Namespace + "/" + p.ConfigMap + "/" + p.Name
			p.hash[0], p.hash[1] = byte(i), byte(seed)
			p.match.managers = []profiles.Manager{profiles.ManagerDask}
			for range r.IntN(4) {
				if r.IntN(4) == 0 {
					p.match.namespaces = append(p.match.namespaces, globs[r.IntN(len(globs))])
				} else {
					p.match.namespaces = append(p.match.namespaces, names[r.IntN(len(names))])
				}
			}
			ps = append(ps, p)
		}
		s := NewSet(ps)
		b := bucket{profiles.ManagerDask, profiles.RoleWorker, profiles.KindPod}
		for _, ns := range append(slices.Clone(names), "elsewhere") {
			for _, skip := range []bool{false, true} {
				sub := &subject{id: profiles.Identity{Manager: profiles.ManagerDask, Role: profiles.RoleWorker}, kind: profiles.KindPod, namespace: ns,
					labels: labels.Set{}, namespaceLabels: labels.Set{}, skip: skip}
				var want layers
				for _, p := range s.platform.buckets[b] {
					if (skip && p.Mode != ModeEnforce) || !p.match.matches(sub) {
						continue
					}
					switch p.Mode {
					case ModeDefault:
						want.platformDefault = append(want.platformDefault, p)
					case ModeMerge:
						want.platformMerge = append(want.platformMerge, p)
					default:
						want.enforce = append(want.enforce, p)
					}
				}
				got := s.selectLayers(sub)
				require.True(t, got.equal(want), "seed %d, namespace %s: index %v, bucket %v", seed, ns, refNames(got.all()), refNames(want.all()))
			}
		}
	}
}

func refNames(ps []*Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Ref
	}
	return out
}
