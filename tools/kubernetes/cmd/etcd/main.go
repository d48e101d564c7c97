// Command etcd is the etcd server from the published go.etcd.io/etcd/server/v3 module.
// The upstream main package lives in etcd's root module, which is not published with
// its dependencies pinned the same way; the server module exports the same entry point.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
