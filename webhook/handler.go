package webhook

import (
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/webhook/ownerevents"
	"github.com/podpatch/podpatch/webhook/policystore"
	"github.com/podpatch/podpatch/webhook/slots"
)

// HandlerOptions configure the admission endpoints.
type HandlerOptions struct {
	// Store holds the policies /mutate applies.
	Store *policystore.Store
	// Policies are the options /validate checks ConfigMaps with.
	Policies policies.Options
	Metrics  *Metrics
	// RequestBudget is the time a request may take, waiting for a slot and reading included.
	RequestBudget time.Duration
	// MaxInFlight is the number of handling slots, shared by both endpoints.
	MaxInFlight int
	// LargeBodyBytes bounds the large bodies (over slots.OrdinaryBody) read and handled at
	// once, shared by both endpoints: with them, the memory the policy engine takes for them.
	// Zero: slots.DefaultLargeBytes (see slots.LargeBytesFor).
	LargeBodyBytes int64
	Log            logr.Logger
	// Lookups answers what patched Pods reference (reference §8); nil when unknown (--policy-dir).
	Lookups validity.Lookups
	// Events receives what /mutate did, for the Events on owning custom resources (reference
	// §9); nil: none.
	Events *ownerevents.Events
}

// NewHandler returns the admission endpoints, POST /mutate and POST /validate.
// controller-runtime's webhook server only routes and instruments them (its Register, which
// keeps the controller_runtime_webhook_* metrics); Server serves them.
func NewHandler(o HandlerOptions) http.Handler {
	routes := webhook.NewServer(webhook.Options{})
	bounds := slots.New(slots.Options{MaxInFlight: o.MaxInFlight, LargeBytes: o.LargeBodyBytes})
	review := func(name string, h admission.Handler) http.Handler {
		return o.Metrics.instrument(name, &Review{Name: name, Log: o.Log.WithName(name), Budget: o.RequestBudget, Slots: bounds,
			Metrics: o.Metrics, Handler: h})
	}
	routes.Register("/mutate", review("mutate", &Mutator{Source: o.Store, Metrics: o.Metrics, PlatformNamespace: o.Policies.PlatformNamespace, Lookups: o.Lookups,
		Events: o.Events}))
	routes.Register("/validate", review("validate", &Validator{Options: o.Policies, Metrics: o.Metrics}))
	return routes.WebhookMux()
}
