// Command podpatch is the podpatch admission webhook and its tools, one file per command:
//
//   - serve (serve.go): the composition root of the webhook: options → components
//     (webhook, internal/references, the leader-only externalurl and audit) → one errgroup;
//   - render (render.go): what policies do to objects, offline, through the webhook's code path;
//   - lint (lint.go, lint_scope.go): validates policy ConfigMaps (and, with --objects, objects
//     against them) and says the scope each ConfigMap is taken in;
//   - test (test.go): runs policy test suites (package policytest);
//   - audit (audit.go), explain (explain.go), diff (diff.go): the cluster tools of
//     reference §7, §9 and §10 (packages audit, explain, preview);
//   - vap (vap.go): the second line, the enforce policies as ValidatingAdmissionPolicies;
//   - map (map.go): the policies compiled into MutatingAdmissionPolicies (package native);
//   - certs (certs.go): serving certificates;
//   - uninstall-webhooks (uninstall.go) and check (check.go): the Helm chart's hooks (lifecycle);
//   - version.
//
// main.go dispatches. The kit every command shares names no command: command.go (flag parsing,
// the errors that set the exit status, --kube-version), command_policies.go (the policy flags,
// the prologue of a command that reads policies, the policy set of files) and
// command_cluster.go (the cluster as the user: kubeconfig by kubectl's loading rules through
// kube.LoadConfig, the reference caches, Nodes and node pools). No command's file refers to
// another's (test/arch's TestCommandFilesIndependent).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `podpatch shapes the Pods and Services that Dask, Spark, Ray and Flink generate.

Usage:
  podpatch render -f FILE [-f FILE…] --policies PATH [--policies PATH…] [flags]
  podpatch lint PATH…
  podpatch test PATH… [--root DIR] [--run PATTERN] [--update] [-o text|json|junit]
  podpatch serve [flags]
  podpatch certs --service NAME --namespace NS --out DIR
  podpatch uninstall-webhooks --mutating NAME --validating NAME [--secret NS/NAME]
  podpatch check [--namespace NS] [--expect-policy NS/CONFIGMAP/POLICY]
  podpatch audit [--namespace NS | -A] [-o table|json|yaml]
  podpatch explain [--namespace NS] KIND/NAME [-o table|json|yaml]
  podpatch diff --policies PATH… [--base PATH…] [-n NS | -A | -f FILE…] [-o table|json|yaml|markdown]
  podpatch vap --policies PATH [--policies PATH…] [--max-validations N]
  podpatch map --policies PATH [--policies PATH…] [--kube-version 1.36]
  podpatch version

Run "podpatch COMMAND --help" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "podpatch: internal error: %v\n", r)
			code = 1
		}
	}()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "render":
		err = runRender(args[1:], stdin, stdout, stderr)
	case "lint":
		err = runLint(args[1:], stdin, stdout, stderr)
	case "test":
		err = runTest(args[1:], stdout, stderr)
	case "certs":
		err = runCerts(args[1:], stdout, stderr)
	case "serve":
		err = runServe(args[1:], stderr)
	case "uninstall-webhooks":
		err = runUninstall(args[1:], stdout, stderr)
	case "check":
		err = runCheck(args[1:], stdout, stderr)
	case "audit":
		err = runAudit(args[1:], stdout, stderr)
	case "explain":
		err = runExplain(args[1:], stdout, stderr)
	case "diff":
		err = runDiff(args[1:], stdin, stdout, stderr)
	case "vap":
		err = runVAP(args[1:], stdin, stdout, stderr)
	case "map":
		err = runMap(args[1:], stdin, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "podpatch", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		err = usageError{fmt.Errorf("unknown command %q", args[0])}
	}
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "podpatch %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "podpatch %s: %v\n", args[0], err)
		return 1
	}
}
