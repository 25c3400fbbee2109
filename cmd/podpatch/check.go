package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/podpatch/podpatch/lifecycle"
)

// checkOptions are the flags of `podpatch check`.
type checkOptions struct {
	Kubeconfig string
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
	c, err := lifecycle.NewClient(o.Kubeconfig)
	if err != nil {
		return err
	}
	o.Log = stdout
	return lifecycle.Check(context.Background(), c, o.CheckOptions)
}
