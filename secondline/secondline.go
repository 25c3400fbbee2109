// Package secondline keeps the second line in the cluster (reference §5, "The second line"):
// on the elected replica of `podpatch serve --second-line`, whenever the platform's policy
// snapshot changes, the ValidatingAdmissionPolicies and bindings vap generates
// from its enforce policies are server-side applied under the field manager
// podpatch-second-line, and those it owns (app.kubernetes.io/managed-by: podpatch) that no
// longer correspond to an enforce policy are deleted. Its Start is one leadership term.
package secondline

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/vap"
)

// FieldManager is the field manager of the second line's server-side applies.
const FieldManager = "podpatch-second-line"

// Defaults of Options.
const (
	DefaultInterval = 2 * time.Second
	DefaultResync   = 10 * time.Minute
)

// Options configure a Sync.
type Options struct {
	Client kubernetes.Interface
	// Policies returns the current snapshot's Set; Ready reports whether the store has synced
	// (before it, an empty Set would delete every generated object).
	Policies func() *policies.Set
	Ready    func() bool
	// PlatformNamespace holds the platform's policies; Generate bounds and scopes the objects.
	PlatformNamespace string
	Generate          vap.Options
	// Interval is how often the snapshot is looked at; Resync how often everything is applied
	// again even when it did not change (objects edited or deleted by hand). Zero: defaults.
	Interval, Resync time.Duration
	Log              logr.Logger
}

// Sync applies the generated objects; one per process.
type Sync struct{ o Options }

// New checks the options.
func New(o Options) (*Sync, error) {
	if o.Client == nil || o.Policies == nil || o.Ready == nil {
		return nil, errors.New("second line: a client, the policies and the store's readiness are required")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	return &Sync{o}, nil
}

// Start runs one leadership term: it applies on every snapshot change and every Resync, until
// ctx ends. A failed round is logged and tried again at the next tick.
func (s *Sync) Start(ctx context.Context) error {
	tick := time.NewTicker(s.o.Interval)
	defer tick.Stop()
	var last *policies.Set
	var lastOut [sha256.Size]byte // what was last applied: a change of namespace policies alone applies nothing
	var lastAt time.Time
	for {
		if set := s.o.Policies(); s.o.Ready() && set != nil && (set != last || time.Since(lastAt) >= s.o.Resync) {
			out := vap.Generate(set, s.o.PlatformNamespace, s.o.Generate)
			key, err := digest(out)
			switch {
			case err != nil:
				s.o.Log.Error(err, "second line not generated")
			case key == lastOut && time.Since(lastAt) < s.o.Resync:
				last = set
			default:
				if err := s.apply(ctx, out); err != nil {
					s.o.Log.Error(err, "second line not in sync; trying again")
				} else {
					last, lastOut, lastAt = set, key, time.Now()
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Once makes the cluster's generated objects those of set: applies every generated policy and
// binding, then deletes the owned ones no enforce policy gives any more.
func (s *Sync) Once(ctx context.Context, set *policies.Set) error {
	return s.apply(ctx, vap.Generate(set, s.o.PlatformNamespace, s.o.Generate))
}

// digest identifies generated objects by their YAML.
func digest(out vap.Output) ([sha256.Size]byte, error) {
	y, err := out.YAML()
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(y), nil
}

func (s *Sync) apply(ctx context.Context, out vap.Output) error {
	want := map[string]bool{}
	api := s.o.Client.AdmissionregistrationV1()
	force := true
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
	var errs []error
	for _, g := range out.Generated {
		want[g.Policy.Name] = true
		p, err := json.Marshal(g.Policy)
		if err != nil {
			return err
		}
		if _, err := api.ValidatingAdmissionPolicies().Patch(ctx, g.Policy.Name, types.ApplyPatchType, p, opts); err != nil {
			errs = append(errs, fmt.Errorf("apply ValidatingAdmissionPolicy %s: %w", g.Policy.Name, err))
			continue // no binding for a policy not there
		}
		b, err := json.Marshal(g.Binding)
		if err != nil {
			return err
		}
		if _, err := api.ValidatingAdmissionPolicyBindings().Patch(ctx, g.Binding.Name, types.ApplyPatchType, b, opts); err != nil {
			errs = append(errs, fmt.Errorf("apply ValidatingAdmissionPolicyBinding %s: %w", g.Binding.Name, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...) // delete nothing while the wanted set is not in place
	}
	owned := metav1.ListOptions{LabelSelector: vap.ManagedByLabel + "=" + vap.ManagedBy}
	bindings, err := api.ValidatingAdmissionPolicyBindings().List(ctx, owned)
	if err != nil {
		return fmt.Errorf("list ValidatingAdmissionPolicyBindings: %w", err)
	}
	for _, b := range bindings.Items {
		if !want[b.Name] {
			if err := api.ValidatingAdmissionPolicyBindings().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete ValidatingAdmissionPolicyBinding %s: %w", b.Name, err))
			}
		}
	}
	vaps, err := api.ValidatingAdmissionPolicies().List(ctx, owned)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list ValidatingAdmissionPolicies: %w", err))...)
	}
	for _, p := range vaps.Items {
		if !want[p.Name] {
			if err := api.ValidatingAdmissionPolicies().Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete ValidatingAdmissionPolicy %s: %w", p.Name, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.o.Log.V(1).Info("second line in sync", "generated", len(out.Generated), "notGenerated", len(out.Skipped))
	return nil
}
