// Command idiomatic is the idiomatic reference webhook of the benchmarks: typed decode into a
// Pod, a hand-written strategic merge patch making the change of the five matching policies,
// and a JSONPatch of the whole object.
package main

import (
	"fmt"
	"os"

	"github.com/podpatch/podpatch/test/bench/reference"
)

func main() {
	h, err := reference.NewIdiomatic()
	if err != nil {
		fmt.Fprintln(os.Stderr, "idiomatic:", err)
		os.Exit(1)
	}
	reference.Main("idiomatic", h)
}
