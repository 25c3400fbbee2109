package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// DefaultPageSize is how many objects one List call returns: a page is all the audit holds of
// the objects it reads, so memory does not grow with the cluster.
const DefaultPageSize = 500

// Reader lists what an audit reads from the API server with paged List calls (limit and
// continue), as raw JSON: the engine patches raw JSON, so nothing this build's Go types do not
// know is lost on the way, and no object is decoded into a Go struct it does not need.
type Reader struct {
	core     rest.Interface
	owners   *kube.Owners
	PageSize int64
}

// NewReader returns a Reader for the kit's cluster.
func NewReader(kit *kube.Kit) (*Reader, error) {
	cfg := rest.CopyConfig(kit.Config)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json" // items are passed on as JSON
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Reader{core: cs.CoreV1().RESTClient(), owners: kit.Owners, PageSize: DefaultPageSize}, nil
}

// Each lists a core/v1 resource ("pods", "services", …) in a namespace ("" for every one),
// optionally label-selected, a page at a time, and calls fn with each item's JSON. The item
// is valid only during the call.
//
// A page is read as it arrives, one item at a time (eachItem): a page of 500 Pods may be 500
// times etcd's 1.5 MiB object limit, and the periodic audit runs inside the webhook's process,
// whose memory limit it must not reach whatever the Pods hold.
func (r *Reader) Each(ctx context.Context, resource, namespace, selector string, fn func(json.RawMessage) error) error {
	opts := metav1.ListOptions{Limit: r.PageSize, LabelSelector: selector}
	for {
		cont, err := r.page(ctx, resource, namespace, &opts, fn)
		if err != nil {
			return fmt.Errorf("list %s: %w", resource, err)
		}
		if cont == "" {
			return nil
		}
		opts.Continue = cont
	}
}

// page reads one page of a List, calling fn with each item, and returns its continue token.
func (r *Reader) page(ctx context.Context, resource, namespace string, opts *metav1.ListOptions, fn func(json.RawMessage) error) (cont string, err error) {
	body, err := r.core.Get().Namespace(namespace).Resource(resource).VersionedParams(opts, scheme.ParameterCodec).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := body.Close(); err == nil {
			err = cerr
		}
	}()
	return eachItem(body, fn)
}

// errNotAList is the error for a response that is not a JSON List.
var errNotAList = errors.New("the response is not a List")

// eachItem reads a List's JSON from r and calls fn with each of its items as it is read, so
// that one item at a time is in memory; it returns the List's continue token. Its members
// may come in any order.
func eachItem(r io.Reader, fn func(json.RawMessage) error) (string, error) {
	d := json.NewDecoder(r)
	if tok, err := d.Token(); err != nil {
		return "", err
	} else if tok != json.Delim('{') {
		return "", errNotAList
	}
	var cont string
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return "", err
		}
		switch key, _ := tok.(string); key {
		case "metadata":
			var m metav1.ListMeta
			if err := d.Decode(&m); err != nil {
				return "", err
			}
			cont = m.Continue
		case "items":
			tok, err := d.Token()
			if err != nil {
				return "", err
			}
			if tok == nil {
				continue // items: null
			}
			if tok != json.Delim('[') {
				return "", errNotAList
			}
			for d.More() {
				var it json.RawMessage
				if err := d.Decode(&it); err != nil {
					return "", err
				}
				if err := fn(it); err != nil {
					return "", err
				}
			}
			if _, err := d.Token(); err != nil { // ]
				return "", err
			}
		default:
			var skip json.RawMessage
			if err := d.Decode(&skip); err != nil {
				return "", err
			}
		}
	}
	if tok, err := d.Token(); err != nil {
		return "", err
	} else if tok != json.Delim('}') {
		return "", errNotAList
	}
	return cont, nil
}

// rawResult is a result's body, or its error with the API server's Status (Raw alone gives
// "unknown" for a refusal).
func rawResult(res rest.Result) ([]byte, error) {
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}

// PolicyConfigMaps lists the policy ConfigMaps (labelled podpatch.io/policy=true) an audit of
// a namespace needs — the platform's and that namespace's —, or every one for all namespaces.
func (r *Reader) PolicyConfigMaps(ctx context.Context, platformNamespace, namespace string) ([]*corev1.ConfigMap, error) {
	namespaces := []string{""}
	if namespace != "" {
		namespaces = []string{platformNamespace}
		if namespace != platformNamespace {
			namespaces = append(namespaces, namespace)
		}
	}
	var out []*corev1.ConfigMap
	for _, ns := range namespaces {
		err := r.Each(ctx, "configmaps", ns, policies.PolicyLabel+"=true", func(raw json.RawMessage) error {
			cm := &corev1.ConfigMap{}
			if err := json.Unmarshal(raw, cm); err != nil {
				return fmt.Errorf("decode ConfigMap: %w", err)
			}
			out = append(out, cm)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// NamespaceLabels returns the labels of one namespace, or of every one for namespace "".
func (r *Reader) NamespaceLabels(ctx context.Context, namespace string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	keep := func(raw json.RawMessage) error {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return fmt.Errorf("decode Namespace: %w", err)
		}
		out[meta.Metadata.Name] = meta.Metadata.Labels
		return nil
	}
	if namespace == "" {
		return out, r.Each(ctx, "namespaces", "", "", keep)
	}
	raw, err := rawResult(r.core.Get().Resource("namespaces").Name(namespace).Do(ctx))
	if err != nil {
		return nil, fmt.Errorf("get namespace %s: %w", namespace, err)
	}
	return out, keep(raw)
}

// Owners resolves an object's owner up to the custom resource behind it with the cluster kit's
// resolver (kube.Owners: the built-in owners its manager's profile names, the ReplicaSet and
// Deployment of Dask's and Flink's Pods, the driver Pod that owns a Spark executor), so that
// the audit names the custom resource. Each of those is read once per audit (its metadata
// only); one the reader cannot read (gone, or RBAC) ends the walk there.
type Owners struct {
	owners *kube.Owners
}

// Owners returns a resolver for one audit round.
func (r *Reader) Owners() *Owners { return &Owners{owners: r.owners.Memo()} }

// Resolve returns the owner the audit reports for an object of a namespace a manager made,
// and whether the walk read it (kube.Owners.Verified): it exists, with that name and UID.
func (o *Owners) Resolve(ctx context.Context, namespace string, manager profiles.Manager, direct *Owner) (owner *Owner, exists bool) {
	if o == nil || direct == nil {
		return direct, false
	}
	ref := metav1.OwnerReference{APIVersion: direct.APIVersion, Kind: direct.Kind, Name: direct.Name, UID: types.UID(direct.UID)}
	up, exists, err := o.owners.Verified(ctx, namespace, manager, ref)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		return direct, false // a passing failure: try again next time
	}
	if up == ref {
		return direct, exists
	}
	return directOwner([]metav1.OwnerReference{up}), exists
}
