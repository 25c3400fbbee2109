package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
)

// ScaleLabel marks the ConfigMaps of a Scale population, so they can be removed together.
const ScaleLabel = "test.podpatch.io/scale"

// Scale is a cluster-scale population of policy ConfigMaps: one in ten in the
// platform namespace, the others spread over Namespaces namespaces named scale-000, scale-001,
// …, one Dask worker policy each. Every policy loads for the Dask worker bucket, but matches
// only the Pods that ask for it: a platform policy p<i> the workers of a group g<i>-*, a
// namespace policy p<i> the Pods labelled ScalePolicyLabel=p<i>. The e2e scale test and
// `make bench` use the same population.
type Scale struct {
	ConfigMaps, Namespaces int
}

// ScalePolicyLabel is the label by which a Pod asks for one namespace policy of a Scale.
const ScalePolicyLabel = "scale.podpatch.io/policy"

// NamespaceNames lists the namespaces of the namespace policies.
func (s Scale) NamespaceNames() []string {
	out := make([]string, s.Namespaces)
	for i := range out {
		out[i] = fmt.Sprintf("scale-%03d", i)
	}
	return out
}

// Objects returns the policy ConfigMaps, named policy-<i>.
func (s Scale) Objects() []*corev1.ConfigMap {
	out := make([]*corev1.ConfigMap, s.ConfigMaps)
	for i := range out {
		out[i] = s.Object(i, 0)
	}
	return out
}

// Object returns the i-th policy ConfigMap at a version: each version changes the value of the
// annotation its policy sets (version 0 is what Objects holds).
func (s Scale) Object(i, version int) *corev1.ConfigMap {
	value := fmt.Sprintf("p%d", i)
	if version > 0 {
		value += fmt.Sprintf("-v%d", version)
	}
	name := fmt.Sprintf("policy-%05d", i)
	if i%10 == 0 || s.Namespaces < 1 {
		return ScaleConfigMap(policies.DefaultPlatformNamespace, name, fmt.Sprintf(`metadata: {name: p%d}
spec:
  match: {managers: [dask], roles: [worker], groups: ["g%d-*"]}
  template:
    metadata: {annotations: {scale.podpatch.io/platform: %s}}
    spec:
      nodeSelector: {pool: g%d}
      tolerations: [{key: pool-%d, operator: Exists, effect: NoSchedule}]
`, i, i, value, i, i))
	}
	// The namespace ConfigMaps go round the namespaces in turn: i-(i+9)/10 of them come before i.
	ns := fmt.Sprintf("scale-%03d", (i-(i+9)/10)%s.Namespaces)
	return ScaleConfigMap(ns, name, fmt.Sprintf(`metadata: {name: p%d}
spec:
  match: {managers: [dask], roles: [worker], selector: {matchLabels: {%s: p%d}}}
  template:
    metadata: {annotations: {scale.example.com/namespace: %s}}
    spec:
      containers:
        - name: "*"
          env: [{name: POLICY, value: p%d}]
          resources: {requests: {memory: 1Gi}}
`, i, ScalePolicyLabel, i, value, i))
}

// ScaleConfigMap wraps one PodTemplatePatch document (without apiVersion and kind) into a
// policy ConfigMap labelled as part of a Scale population.
func ScaleConfigMap(namespace, name, doc string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{policies.PolicyLabel: "true", ScaleLabel: "true"}},
		Data: map[string]string{"policy.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\n" + doc},
	}
}

// CreateNamespaces creates namespaces, leaving those that exist.
func CreateNamespaces(ctx context.Context, c client.Client, names []string) error {
	for _, n := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if err := client.IgnoreAlreadyExists(c.Create(ctx, ns)); err != nil {
			return fmt.Errorf("namespace %s: %w", n, err)
		}
	}
	return nil
}

// CreateAll creates objects with a few concurrent workers and returns the first errors.
func CreateAll[T client.Object](ctx context.Context, c client.Client, objs []T, workers int) error {
	next := make(chan T)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range max(workers, 1) {
		wg.Go(func() {
			for o := range next {
				if err := c.Create(ctx, o); err != nil {
					mu.Lock()
					if len(errs) < 5 {
						errs = append(errs, fmt.Errorf("%s/%s: %w", o.GetNamespace(), o.GetName(), err))
					}
					mu.Unlock()
				}
			}
		})
	}
feed:
	for _, o := range objs {
		select {
		case next <- o:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

// DeleteScale removes every ConfigMap labelled ScaleLabel from the platform namespace and the
// namespaces of a Scale; the namespaces stay (a bare control plane has no controller to finish
// deleting them).
func DeleteScale(ctx context.Context, c client.Client, s Scale) error {
	var errs []error
	for _, ns := range append(s.NamespaceNames(), policies.DefaultPlatformNamespace) {
		errs = append(errs, c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns),
			client.MatchingLabels{ScaleLabel: "true"}))
	}
	return errors.Join(errs...)
}
