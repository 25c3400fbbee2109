package externalurl

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

func TestOptions(t *testing.T) {
	parse := func(args ...string) error {
		o := NewOptions()
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		o.AddFlags(fs)
		require.NoError(t, fs.Parse(args))
		return o.Validate()
	}
	require.NoError(t, parse())
	require.NoError(t, parse("--external-url-node-address-types=InternalIP,ExternalIP", "--external-url-service-selector=podpatch.io/external-url in (true)"))
	require.ErrorContains(t, parse("--external-url-node-address-types=PublicIP"), `unknown type "PublicIP"`)
	require.ErrorContains(t, parse("--external-url-service-selector=a=(b"), "--external-url-service-selector")
	// Off: nothing else matters.
	require.NoError(t, parse("--external-urls=false", "--external-url-node-address-types=PublicIP"))
}
