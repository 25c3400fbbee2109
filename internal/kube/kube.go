// Package kube is podpatch's one way to the API server outside admission serving: the clients
// built from one rest.Config, the one Event broadcaster every component records through, and
// the one owner resolver that walks a manager's objects up to its custom resource. cmd/podpatch
// builds one Kit and hands it to the policy feed, the audit and the external URL resolver.
package kube

import (
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Kit holds the clients of one cluster, its Event broadcaster and its owner resolver. Build
// it once (New) and Close it when the process ends.
type Kit struct {
	// Config is the configuration every client was built from; a component that needs another
	// content type or user agent copies it.
	Config *rest.Config
	// Clientset is the typed client: informers, Events, patches.
	Clientset kubernetes.Interface
	// Metadata reads objects' metadata only: owners and namespaces.
	Metadata metadata.Interface
	// Events is the Event broadcaster; Recorder gives a component its recorder.
	Events *Events
	// Owners resolves owners up to the custom resources, a bounded read per owner.
	Owners *Owners
}

// New builds the clients of a cluster and starts the Event broadcaster.
func New(cfg *rest.Config) (*Kit, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Kit{Config: cfg, Clientset: cs, Metadata: meta, Events: NewEvents(cs), Owners: NewOwners(MetadataLookup(meta))}, nil
}

// Recorder is a component's Event recorder on the kit's one broadcaster.
func (k *Kit) Recorder(component string) *Recorder { return k.Events.Recorder(component) }

// Close stops the Event broadcaster.
func (k *Kit) Close() { k.Events.Shutdown() }
