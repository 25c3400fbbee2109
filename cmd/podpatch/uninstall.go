package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/lifecycle"
	"github.com/podpatch/podpatch/vap"
)

// uninstallOptions are the flags of `podpatch uninstall-webhooks`.
type uninstallOptions struct {
	Kubeconfig string
	Mutating   []string
	Validating []string
	Secrets    []string
	SecondLine bool
	Timeout    time.Duration
}

func (o *uninstallOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringSliceVar(&o.Mutating, "mutating", nil, "MutatingWebhookConfiguration to delete (repeatable)")
	fs.StringSliceVar(&o.Validating, "validating", nil, "ValidatingWebhookConfiguration to delete (repeatable)")
	fs.StringSliceVar(&o.Secrets, "secret", nil, "NAMESPACE/NAME of a Secret to delete, e.g. the one podpatch --self-signed keeps (repeatable)")
	fs.BoolVar(&o.SecondLine, "second-line", false, "then delete the second line's ValidatingAdmissionPolicies and bindings (label "+vap.ManagedByLabel+"="+vap.ManagedBy+"), which would deny objects without their enforce policies once podpatch is gone")
	fs.DurationVar(&o.Timeout, "timeout", time.Minute, "give up after this long")
}

// runUninstall deletes podpatch's webhook configurations and, with --second-line, the second
// line's objects: the chart's pre-delete hook, so that an uninstall never leaves a webhook that
// nothing serves nor a generated policy that nothing keeps.
func runUninstall(args []string, stdout, stderr io.Writer) error {
	o := &uninstallOptions{}
	if _, err := parseCommand("uninstall-webhooks", args, stderr, false, o); err != nil {
		return err
	}
	if len(o.Mutating)+len(o.Validating) == 0 {
		return usageError{errors.New("name at least one --mutating or --validating configuration")}
	}
	var secrets []types.NamespacedName
	for _, s := range o.Secrets {
		ns, name, ok := strings.Cut(s, "/")
		if !ok || ns == "" || name == "" {
			return usageError{fmt.Errorf("--secret %q: want NAMESPACE/NAME", s)}
		}
		secrets = append(secrets, types.NamespacedName{Namespace: ns, Name: name})
	}
	c, err := lifecycle.NewClient(o.Kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	done, err := lifecycle.RemoveWebhooks(ctx, c, o.Mutating, o.Validating, secrets)
	if err == nil && o.SecondLine {
		var more []string
		more, err = lifecycle.RemoveSecondLine(ctx, c, vap.ManagedByLabel+"="+vap.ManagedBy)
		done = append(done, more...)
	}
	for _, line := range done {
		fmt.Fprintln(stdout, line)
	}
	return err
}
