package policies

import "github.com/podpatch/podpatch/policies/kueue"

// The engine's policies say to kueue.Keep which of them enforce: with Kueue's flavors unknown,
// an enforce policy's placement is never left out of a Pod marked as Kueue's (reference §8,
// kueue-placement-conflict; issue 33).
var _ kueue.Enforcer = (*Policy)(nil)

// Enforced reports whether the policy is an enforce policy (reference §2).
func (p *Policy) Enforced() bool { return p.Mode == ModeEnforce }
