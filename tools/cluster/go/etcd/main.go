// etcd's server as a binary: its release module is not installable with `go install`, its server
// module is, and this is the whole of its main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
