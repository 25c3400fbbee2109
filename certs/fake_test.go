package certs

import (
	"encoding/json"
	"strconv"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// optimistic gives c the API server's optimistic concurrency, which client-go's
// fake clientset lacks (its tracker neither sets metadata.resourceVersion nor
// checks it): every create, update and apply stores a new resourceVersion, and
// an update or apply that carries one other than the stored object's fails
// with a Conflict, counted in conflicts unless it is nil. SelfSigned and the
// CA injector rely on those conflicts.
func optimistic(c *fake.Clientset, conflicts *atomic.Int64) *fake.Clientset {
	var last int64 // guarded by c's lock, under which reactors run
	next := func() string { last++; return strconv.FormatInt(last, 10) }
	current := func(a k8stesting.Action, name string) (string, bool) {
		obj, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), name)
		if err != nil {
			return "", false
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return "", false
		}
		return m.GetResourceVersion(), true
	}
	conflict := func(a k8stesting.Action, name string) error {
		if conflicts != nil {
			conflicts.Add(1)
		}
		return apierrors.NewConflict(a.GetResource().GroupResource(), name, errStale)
	}
	c.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a := a.(type) {
		case k8stesting.CreateActionImpl:
			if m, err := meta.Accessor(a.GetObject()); err == nil {
				if _, exists := current(a, m.GetName()); !exists {
					m.SetResourceVersion(next())
				}
			}
		case k8stesting.UpdateActionImpl:
			m, err := meta.Accessor(a.GetObject())
			if err != nil {
				return false, nil, nil
			}
			rv, exists := current(a, m.GetName())
			if !exists {
				return false, nil, nil
			}
			if m.GetResourceVersion() != "" && m.GetResourceVersion() != rv {
				return true, nil, conflict(a, m.GetName())
			}
			m.SetResourceVersion(next())
		case k8stesting.PatchActionImpl:
			if a.GetPatchType() != types.ApplyPatchType {
				return false, nil, nil
			}
			body := &unstructured.Unstructured{Object: map[string]any{}}
			if err := json.Unmarshal(a.GetPatch(), &body.Object); err != nil {
				return true, nil, err
			}
			body.SetName(a.GetName())
			if rv, exists := current(a, a.GetName()); exists && body.GetResourceVersion() != "" && body.GetResourceVersion() != rv {
				return true, nil, conflict(a, a.GetName())
			}
			body.SetResourceVersion(next())
			if err := c.Tracker().Apply(a.GetResource(), body, a.GetNamespace(), a.PatchOptions); err != nil {
				return true, nil, err
			}
			obj, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), a.GetName())
			return true, obj, err
		}
		return false, nil, nil
	})
	return c
}

// errStale is the reason of optimistic's conflicts.
var errStale = staleError{}

type staleError struct{}

func (staleError) Error() string {
	return "the object has been modified; please apply your changes to the latest version and try again"
}
