// Package webhook is podpatch's admission adapter: it decodes AdmissionReviews (review.go,
// head.go) within the request budget and slots (budget.go, package slots), runs the policy
// engine on the policies of the store (package policystore) and answers with a JSONPatch
// (mutate.go), offering what it did to the owner Events (package ownerevents); it validates
// policy ConfigMaps (validate.go); and it serves it all over TLS (server.go), with probes
// (probes.go) and metrics (metrics.go, observe.go). cmd/podpatch's serve builds the
// components and wires them here (handler.go).
package webhook
