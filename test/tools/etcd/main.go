// Command etcd is the etcd server, built from source for the end-to-end tests
// (controller-runtime's envtest) by hack/build-control-plane.sh.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
