// A CoreDNS with only the plugins a local node's cluster DNS needs: the
// `kubernetes` plugin answers for Services and Pods under cluster.local from
// the apiserver; `errors` logs failures. Everything else is refused, as the
// node's network namespace has no upstream to forward to.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
)

func init() {
	// The order the plugins run in, as in CoreDNS's plugin.cfg.
	dnsserver.Directives = []string{"errors", "log", "kubernetes"}
}

func main() {
	coremain.Run()
}
