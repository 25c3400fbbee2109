package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/audit"
	"github.com/podpatch/podpatch/internal/kube"
	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/preview"
)

// The exit statuses of `podpatch diff` (reference §10) besides 0, 1 and 2.
const (
	diffExitChanges = 3
	diffExitBreaks  = 4
)

// diffOptions are the flags of `podpatch diff`.
type diffOptions struct {
	policyOptions
	Policies        []string
	Base            []string
	Delete          []string
	Kubeconfig      string
	Namespace       string
	AllNamespaces   bool
	Files           []string
	Nodes           []string
	NamespaceLabels map[string]string
	Output          string
	PageSize        int64
	KubeVersion     string
}

func (o *diffOptions) AddFlags(fs *pflag.FlagSet) {
	o.policyOptions.AddFlags(fs)
	fs.StringArrayVar(&o.Policies, "policies", nil, "changed policy ConfigMaps: a file or directory (repeatable); each replaces the base ConfigMap of its namespace/name")
	fs.StringArrayVar(&o.Base, "base", nil, "base policy ConfigMaps: a file or directory (repeatable; default: those live in the cluster)")
	fs.StringArrayVar(&o.Delete, "delete", nil, "NAMESPACE/NAME of a base policy ConfigMap the change deletes (repeatable)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVarP(&o.Namespace, "namespace", "n", "", "live objects: the namespace to read (default: the kubeconfig context's); files: the namespace of objects and ConfigMaps without one (default: default)")
	fs.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "preview the live objects of every namespace")
	fs.StringArrayVarP(&o.Files, "filename", "f", nil, "objects to preview instead of live ones: a YAML or JSON file, or - for stdin (repeatable)")
	fs.StringVar(&o.KubeVersion, "kube-version", "", kubeVersionFlag+"; without a cluster: 1."+strconv.Itoa(versions.NewestMinor))
	fs.StringArrayVar(&o.Nodes, "nodes", nil, "Nodes, Karpenter NodePools and GKE ComputeClasses to place Pods on instead of the cluster's: a YAML or JSON file, or - for stdin (repeatable; e.g. kubectl get nodes,nodepools.karpenter.sh -o yaml)")
	fs.StringToStringVar(&o.NamespaceLabels, "namespace-labels", nil, "files: labels of the objects' namespace, k=v,…")
	fs.StringVarP(&o.Output, "output", "o", "table", "output format: "+strings.Join(preview.Formats, ", "))
	fs.Int64Var(&o.PageSize, "page-size", audit.DefaultPageSize, "objects per List call")
}

func (o *diffOptions) Validate() error {
	if len(o.Policies) == 0 && len(o.Delete) == 0 {
		return usageError{errors.New("at least one --policies PATH (or --delete NS/NAME) is required")}
	}
	if o.AllNamespaces && (o.Namespace != "" || len(o.Files) > 0) {
		return usageError{errors.New("--all-namespaces excludes --namespace and --filename")}
	}
	if !slices.Contains(preview.Formats, o.Output) {
		return usageError{fmt.Errorf("--output %q: want one of %s", o.Output, strings.Join(preview.Formats, ", "))}
	}
	if o.PageSize < 1 {
		return usageError{errors.New("--page-size must be at least 1")}
	}
	if len(o.Files) == 0 && len(o.NamespaceLabels) > 0 {
		return usageError{errors.New("--namespace-labels is for --filename objects (live namespaces have their own)")}
	}
	return stdinOnce(o.Files, o.Policies, o.Base, o.Nodes)
}

// runDiff is `podpatch diff` (reference §10): exit status 0 when the change changes nothing, 3
// when it changes objects, 4 when it breaks some (invalid, unschedulable, an error finding),
// 1 on errors.
func runDiff(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o := &diffOptions{}
	popts, err := parsePolicyCommand("diff", args, stderr, o)
	if err != nil {
		return err
	}
	warn := func(msg string) { fmt.Fprintf(stderr, "podpatch diff: warning: %s\n", msg) }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	fileNamespace := o.Namespace
	if fileNamespace == "" {
		fileNamespace = "default"
	}
	// The cluster: for live objects, the live base policies, and Nodes and NodePools.
	var kit *kube.Kit
	var reader *audit.Reader
	liveNamespace := ""
	if len(o.Files) == 0 || len(o.Base) == 0 || o.Kubeconfig != "" {
		cfg, contextNamespace, err := kube.LoadConfig(o.Kubeconfig)
		if err != nil {
			return err
		}
		if len(o.Files) == 0 && !o.AllNamespaces {
			if liveNamespace = o.Namespace; liveNamespace == "" {
				liveNamespace = contextNamespace
			}
		}
		if kit, err = kube.New(cfg); err != nil {
			return err
		}
		defer kit.Close()
		if reader, err = audit.NewReader(kit); err != nil {
			return err
		}
		reader.PageSize = o.PageSize
	}

	var base []policies.SourcedConfigMap
	if len(o.Base) > 0 {
		if base, err = policyfiles.ReadConfigMaps(o.Base, fileNamespace, stdin); err != nil {
			return err
		}
	} else {
		cms, err := reader.PolicyConfigMaps(ctx, popts.PlatformNamespace, liveNamespace)
		if err != nil {
			return err
		}
		for _, cm := range cms {
			base = append(base, policies.SourcedConfigMap{File: "(cluster)", ConfigMap: cm})
		}
		popts.WithResourceVersion = true
	}
	changes, err := policyfiles.ReadConfigMaps(o.Policies, fileNamespace, stdin)
	if err != nil {
		return err
	}
	sets, probs, baseProbs, err := preview.NewSets(base, changes, o.Delete, popts)
	if err != nil {
		return usageError{err}
	}
	for _, p := range baseProbs {
		warn(fmt.Sprintf("base policy ConfigMap %s fails to compile (%d problem(s); see podpatch lint): left out", p.ConfigMap, len(p.Problems)))
	}
	if len(probs) > 0 {
		fmt.Fprintln(stderr, policies.ProblemLines(probs))
		return fmt.Errorf("%d invalid policy ConfigMap(s); run podpatch lint for details", len(probs))
	}

	var snap *placement.Snapshot
	if len(o.Nodes) > 0 {
		if snap, err = nodeFiles(o.Nodes, stdin); err != nil {
			return err
		}
	}
	var cluster validity.Lookups
	if kit != nil {
		if snap == nil {
			snap = snapshot(ctx, kit, warn)
		}
		var refErr error
		if cluster, refErr = startReferences(ctx, kit, referencesTimeout); refErr != nil {
			warn(refErr.Error() + "; policies that name a missing PriorityClass, RuntimeClass or ServiceAccount are previewed as if applied")
		}
	}
	// The fields the cluster's version (or --kube-version; without a cluster the newest
	// supported) drops or refuses (reference §8).
	kube, err := optionalKubeVersion(o.KubeVersion)
	if err != nil {
		return err
	}
	if kube == nil && kit == nil {
		v := versions.Newest
		kube = &v
	}
	cluster = lookupsAt(cluster, kube)
	warnKubeVersion(cluster, warn)
	r := preview.NewRunner(sets, snap, 0)
	r.OnError = func(err error) { warn(err.Error()) }
	each := func(in preview.Input) {
		in.Lookups = cluster
		r.Add(in)
	}
	if len(o.Files) > 0 {
		err = eachFileObject(o.Files, fileNamespace, o.NamespaceLabels, stdin, each)
	} else {
		err = eachLiveObject(ctx, reader, liveNamespace, each)
	}
	if err != nil {
		return err
	}
	rep := r.Report()
	if err := preview.Write(stdout, rep, o.Output); err != nil {
		return err
	}
	switch {
	case rep.Stats.Errors > 0:
		return fmt.Errorf("%d object(s) could not be previewed", rep.Stats.Errors)
	case rep.Stats.Breaking > 0:
		return exitError{diffExitBreaks}
	case rep.Stats.Changed > 0:
		return exitError{diffExitChanges}
	}
	return nil
}

// nodeFiles reads the --nodes files into a snapshot for the unschedulable check and the pool
// moves.
func nodeFiles(files []string, stdin io.Reader) (*placement.Snapshot, error) {
	snap := &placement.Snapshot{}
	for _, f := range files {
		docs, err := policyfiles.Documents(f, stdin)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			if _, err := snap.Add(d.JSON); err != nil {
				return nil, fmt.Errorf("--nodes: %s: document %d: %w", f, d.Index, err)
			}
		}
	}
	return snap, nil
}

// eachFileObject reads the objects of -f files, as `render` does.
func eachFileObject(files []string, namespace string, labels map[string]string, stdin io.Reader, fn func(preview.Input)) error {
	for _, f := range files {
		docs, err := policyfiles.Documents(f, stdin)
		if err != nil {
			return err
		}
		ins, err := preview.FileObjects(docs, namespace)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, in := range ins {
			in.NamespaceLabels = labels
			fn(in)
		}
	}
	return nil
}

// eachLiveObject reads the recognised Pods and Services of a namespace ("" for all), as the
// audit reads them.
func eachLiveObject(ctx context.Context, reader *audit.Reader, namespace string, fn func(preview.Input)) error {
	labels, err := reader.NamespaceLabels(ctx, namespace)
	if err != nil {
		return err
	}
	return reader.EachObject(ctx, namespace, func(kind profiles.Kind, raw json.RawMessage) error {
		var meta struct {
			Metadata struct{ Namespace string } `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			return err
		}
		fn(preview.Input{Kind: kind, JSON: raw, Namespace: meta.Metadata.Namespace, NamespaceLabels: labels[meta.Metadata.Namespace], Live: true})
		return ctx.Err()
	})
}
