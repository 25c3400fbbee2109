package policystore

import (
	"context"

	"github.com/podpatch/podpatch/webhook/slots"
)

// MaxCompiles bounds the policy ConfigMaps compiled at once in the process, by /validate and
// by the store together. One compile holds at most one document's parse tree (a few hundred
// bytes per byte of its text, at most policies.MaxPolicyTextBytes: tens of MiB for the densest
// text), so tenants writing ConfigMaps in parallel cannot add these up past --memory-limit.
const MaxCompiles = 2

// compiles is the process's compile slots: what they bound is the process's memory, shared by
// every Store and every validating handler in it.
var compiles = slots.New(slots.Options{MaxInFlight: MaxCompiles})

// storeCompiles is the key under which the Store takes compile slots; /validate's requests take
// them under "" (AcquireCompile). A slot given back goes to the key with the fewest compiles in
// flight, holding or waiting (slots.Slots.Acquire), and a Store compiles one ConfigMap at a
// time: while a tenant's writes queue up in /validate, the store's next compile — a platform
// change among them — waits for one compile to end, not for the queue (reference §5).
const storeCompiles = "policy store"

// AcquireCompile takes one of the process's compile slots, waiting until ctx is done (a free
// slot is taken even then); whoever compiles a policy ConfigMap holds one, the Store and
// /validate alike (reference §3 "Limits"). ReleaseCompile gives it back.
func AcquireCompile(ctx context.Context) error { return compiles.Acquire(ctx, "") }

// ReleaseCompile returns a compile slot taken by AcquireCompile.
func ReleaseCompile() { compiles.Release("") }
