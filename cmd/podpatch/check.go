package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podpatch/podpatch/internal/references"
	"github.com/podpatch/podpatch/lifecycle"
	"github.com/podpatch/podpatch/lint"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/versions"
)

// checkOptions are the flags of `podpatch check`.
type checkOptions struct {
	Kubeconfig  string
	KubeVersion string
	lifecycle.CheckOptions
}

func (o *checkOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVar(&o.MutatingWebhookConfiguration, "mutating-webhook-configuration", "podpatch", "podpatch's MutatingWebhookConfiguration")
	fs.StringVar(&o.Webhook, "webhook", "", "webhook entry to probe (default: the first)")
	fs.StringVar(&o.Namespace, "namespace", "default", "namespace for the dry-run probe Pod; must not be excluded by the webhook's namespaceSelector")
	fs.StringToStringVar(&o.Labels, "label", nil, "labels for the probe Pod, key=value (repeatable)")
	fs.StringVar(&o.ExpectPolicy, "expect-policy", "", "NAMESPACE/CONFIGMAP/POLICY that must patch the probe Pod (default: the create only has to succeed)")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "how long each step is retried")
	fs.StringVar(&o.KubeVersion, "kube-version", "", fmt.Sprintf("Kubernetes version to check the cluster's policy ConfigMaps for (1.%d to 1.%d), as before an upgrade: fails if it refuses a field one sets (default: the cluster's, whose refusals are warned)", versions.OldestMinor, versions.NewestMinor))
}

// runCheck verifies an installation end to end: the chart's `helm test`.
func runCheck(args []string, stdout, stderr io.Writer) error {
	o := &checkOptions{}
	if _, err := parseCommand("check", args, stderr, false, o); err != nil {
		return err
	}
	if o.MutatingWebhookConfiguration == "" || o.Namespace == "" || o.Timeout <= 0 {
		return usageError{errors.New("--mutating-webhook-configuration and --namespace must not be empty, --timeout must be positive")}
	}
	kube, err := optionalKubeVersion(o.KubeVersion)
	if err != nil {
		return err
	}
	c, err := lifecycle.NewClient(o.Kubeconfig)
	if err != nil {
		return err
	}
	o.Log = stdout
	ctx := context.Background()
	if err := checkKubeVersion(ctx, c, kube, stdout); err != nil {
		return err
	}
	return lifecycle.Check(ctx, c, o.CheckOptions)
}

// checkKubeVersion says which Kubernetes version the cluster runs and whether podpatch
// supports it, and what that version (or kube, before an upgrade) does with the fields the
// cluster's policy ConfigMaps set (reference §8): dropped ones have no effect, refused ones
// leave their policy out. It fails only on refusals at an explicit kube.
func checkKubeVersion(ctx context.Context, c kubernetes.Interface, kube *versions.Version, out io.Writer) error {
	info, err := c.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("the cluster's version (discovery): %w", err)
	}
	live, err := references.ServerVersionOf(info)
	switch {
	case err != nil:
		fmt.Fprintf(out, "warning: the cluster's version %q: %v\n", info.GitVersion, err)
	case live.Supported():
		fmt.Fprintf(out, "ok: Kubernetes %s (%s), supported (1.%d to 1.%d)\n", live, info.GitVersion, versions.OldestMinor, versions.NewestMinor)
	default:
		fmt.Fprintf(out, "warning: Kubernetes %s (%s) is not supported by podpatch (1.%d to 1.%d): it checks no version's fields\n", live, info.GitVersion, versions.OldestMinor, versions.NewestMinor)
	}
	target := kube
	if target == nil {
		if err != nil || !live.Supported() {
			return nil
		}
		target = &live
	}
	var cms []policies.SourcedConfigMap
	opts := metav1.ListOptions{LabelSelector: policies.PolicyLabel + "=true", Limit: 100}
	for {
		list, err := c.CoreV1().ConfigMaps("").List(ctx, opts)
		if err != nil {
			fmt.Fprintf(out, "warning: policy ConfigMaps not read (%v): their fields are not checked for Kubernetes %s\n", err, target)
			return nil
		}
		for i := range list.Items {
			cms = append(cms, policies.SourcedConfigMap{File: "(cluster)", ConfigMap: &list.Items[i]})
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	set, _ := policies.Compile(cms, policies.DefaultOptions()) // podpatch lint reports the problems
	lines, refused := lint.VersionEffects(set, *target)
	for _, l := range lines {
		fmt.Fprintf(out, "warning: %s\n", l)
	}
	if refused > 0 && kube != nil {
		return fmt.Errorf("%d field(s) the cluster's policies set are refused by Kubernetes %s: those policies would be left out, or their objects denied (enforce)", refused, kube)
	}
	fmt.Fprintf(out, "ok: the %d policy ConfigMap(s) checked for Kubernetes %s (%d field(s) without effect, %d refused)\n", len(cms), target, len(lines)-refused, refused)
	return nil
}
