// Command kube is a multi-call binary: invoked as kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, kube-proxy or kubectl (by
// symlink name, or by first argument) it runs that upstream command unchanged.
// One binary keeps the cold build to a single link of the shared dependency
// graph.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var commands = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kube-proxy":              proxy.NewProxyCommand,
	"kubelet":                 newKubeletCommand,
	"kubectl":                 kubectlcmd.NewDefaultKubectlCommand,
}

// As upstream's cmd/kubelet/kubelet.go: the command takes a background context.
func newKubeletCommand() *cobra.Command {
	return kubelet.NewKubeletCommand(context.Background())
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "usage: kube {kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kubectl} [flags]\n")
		os.Exit(2)
	}
	if name == "kubectl" {
		// As upstream kubectl's main: errors are printed in kubectl's own format.
		if err := cli.RunNoErrOutput(newCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	}
	os.Exit(cli.Run(newCommand()))
}
