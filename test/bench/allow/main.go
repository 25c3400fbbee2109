// Command allow is the allow-only reference webhook of the benchmarks: controller-runtime's
// webhook server, podpatch's TLS settings, and a handler that allows every review unpatched.
package main

import "github.com/podpatch/podpatch/test/bench/reference"

func main() { reference.Main("allow", reference.Allow{}) }
