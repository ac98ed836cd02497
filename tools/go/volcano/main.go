// Command volcano is a multi-call binary: invoked as vc-scheduler,
// vc-controller-manager or vc-webhook-manager (by symlink name, or by first
// argument) it runs that Volcano component. Upstream's mains are package main
// and cannot be imported, so each function below repeats what the pinned
// release's cmd/<component>/main.go does, including its blank imports: they
// register the scheduler's actions and plugins, the controllers and the
// admission webhooks, and leaving one out silently drops that feature.
// One binary keeps the cold build to a single link of the shared dependencies.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/spf13/pflag"
	_ "go.uber.org/automaxprocs"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseoptions "k8s.io/component-base/config/options"
	"k8s.io/klog/v2"

	commonutil "volcano.sh/volcano/pkg/util"
	"volcano.sh/volcano/pkg/version"

	// cmd/scheduler/main.go
	scheduler "volcano.sh/volcano/cmd/scheduler/app"
	scheduleroptions "volcano.sh/volcano/cmd/scheduler/app/options"
	_ "volcano.sh/volcano/pkg/scheduler/actions"
	_ "volcano.sh/volcano/pkg/scheduler/plugins"
	_ "volcano.sh/volcano/pkg/scheduler/util/assert"

	// cmd/controller-manager/main.go
	_ "k8s.io/component-base/metrics/prometheus/restclient"
	controllermanager "volcano.sh/volcano/cmd/controller-manager/app"
	controllermanageroptions "volcano.sh/volcano/cmd/controller-manager/app/options"
	_ "volcano.sh/volcano/pkg/controllers/colocationconfig"
	_ "volcano.sh/volcano/pkg/controllers/cronjob"
	"volcano.sh/volcano/pkg/controllers/framework"
	_ "volcano.sh/volcano/pkg/controllers/garbagecollector"
	_ "volcano.sh/volcano/pkg/controllers/hypernode"
	_ "volcano.sh/volcano/pkg/controllers/job"
	_ "volcano.sh/volcano/pkg/controllers/jobflow"
	_ "volcano.sh/volcano/pkg/controllers/jobtemplate"
	_ "volcano.sh/volcano/pkg/controllers/podgroup"
	_ "volcano.sh/volcano/pkg/controllers/queue"
	_ "volcano.sh/volcano/pkg/controllers/sharding"

	// cmd/webhook-manager/main.go
	webhookmanager "volcano.sh/volcano/cmd/webhook-manager/app"
	webhookmanageroptions "volcano.sh/volcano/cmd/webhook-manager/app/options"
	_ "volcano.sh/volcano/pkg/features"
	_ "volcano.sh/volcano/pkg/webhooks/admission/cronjobs/validate"
	_ "volcano.sh/volcano/pkg/webhooks/admission/hypernodes/validate"
	_ "volcano.sh/volcano/pkg/webhooks/admission/jobflows/validate"
	_ "volcano.sh/volcano/pkg/webhooks/admission/jobs/mutate"
	_ "volcano.sh/volcano/pkg/webhooks/admission/jobs/validate"
	_ "volcano.sh/volcano/pkg/webhooks/admission/podgroups/mutate"
	_ "volcano.sh/volcano/pkg/webhooks/admission/podgroups/validate"
	_ "volcano.sh/volcano/pkg/webhooks/admission/pods/mutate"
	_ "volcano.sh/volcano/pkg/webhooks/admission/pods/validate"
	_ "volcano.sh/volcano/pkg/webhooks/admission/queues/mutate"
	_ "volcano.sh/volcano/pkg/webhooks/admission/queues/validate"
)

// Each upstream main declares this flag at package level.
var logFlushFreq = pflag.Duration("log-flush-frequency", 5*time.Second, "Maximum number of seconds between log flushes")

var commands = map[string]func(){
	"vc-scheduler":          runScheduler,
	"vc-controller-manager": runControllerManager,
	"vc-webhook-manager":    runWebhookManager,
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		// pflag.Parse (in cliflag.InitFlags) reads os.Args[1:]: drop the command name.
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	run, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "usage: volcano {vc-scheduler|vc-controller-manager|vc-webhook-manager} [flags]\n")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(runtime.NumCPU())
	klog.InitFlags(nil)
	// Opt into the new klog behavior so that -stderrthreshold is honored even
	// when -logtostderr=true (the default).
	flag.Set("legacy_stderr_threshold_behavior", "false") //nolint:errcheck
	flag.Set("stderrthreshold", "INFO")                   //nolint:errcheck
	run()
}

func runScheduler() {
	fs := pflag.CommandLine
	s := scheduleroptions.NewServerOption()

	s.AddFlags(fs)
	utilfeature.DefaultMutableFeatureGate.AddFlag(fs)

	commonutil.LeaderElectionDefault(&s.LeaderElection)
	s.LeaderElection.ResourceName = commonutil.GenerateComponentName(s.SchedulerNames)
	componentbaseoptions.BindLeaderElectionFlags(&s.LeaderElection, fs)
	s.RegisterOptions()

	cliflag.InitFlags()

	if s.PrintVersion {
		version.PrintVersionAndExit()
		return
	}

	if err := s.CheckOptionOrDie(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	if s.CaCertFile != "" && s.CertFile != "" && s.KeyFile != "" {
		if err := s.ParseCAFiles(nil); err != nil {
			klog.Fatalf("Failed to parse CA file: %v", err)
		}
	}

	klog.StartFlushDaemon(*logFlushFreq)
	defer klog.Flush()

	if err := scheduler.Run(s); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}

func runControllerManager() {
	fs := pflag.CommandLine
	s := controllermanageroptions.NewServerOption()
	// knownControllers is a list of all known controllers.
	var knownControllers = func() []string {
		controllerNames := []string{}
		fn := func(controller framework.Controller) {
			controllerNames = append(controllerNames, controller.Name())
		}
		framework.ForeachController(fn)
		sort.Strings(controllerNames)
		return controllerNames
	}
	s.AddFlags(fs, knownControllers())

	// Register controller-specific flags for controllers that implement FlagProvider.
	framework.ForeachController(func(controller framework.Controller) {
		if fp, ok := controller.(framework.FlagProvider); ok {
			fp.AddFlags(fs)
		}
	})

	utilfeature.DefaultMutableFeatureGate.AddFlag(fs)

	commonutil.LeaderElectionDefault(&s.LeaderElection)
	s.LeaderElection.ResourceName = "vc-controller-manager"
	componentbaseoptions.BindLeaderElectionFlags(&s.LeaderElection, fs)

	cliflag.InitFlags()

	if s.PrintVersion {
		version.PrintVersionAndExit()
		return
	}
	if err := s.CheckOptionOrDie(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	if s.CaCertFile != "" && s.CertFile != "" && s.KeyFile != "" {
		if err := s.ParseCAFiles(nil); err != nil {
			fmt.Fprintf(os.Stderr, "Failed to parse CA file: %v\n", err)
			os.Exit(1)
		}
	}

	klog.StartFlushDaemon(*logFlushFreq)
	defer klog.Flush()

	if err := controllermanager.Run(s); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}

func runWebhookManager() {
	config := webhookmanageroptions.NewConfig()
	config.AddFlags(pflag.CommandLine)
	utilfeature.DefaultMutableFeatureGate.AddFlag(pflag.CommandLine)

	cliflag.InitFlags()

	if config.PrintVersion {
		version.PrintVersionAndExit()
		return
	}

	klog.StartFlushDaemon(*logFlushFreq)
	defer klog.Flush()

	if err := config.CheckPortOrDie(); err != nil {
		klog.Fatalf("Configured port is invalid: %v", err)
	}

	if err := config.ParseCAFiles(nil); err != nil {
		klog.Fatalf("Failed to parse CA file: %v", err)
	}

	if err := webhookmanager.Run(config); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
}
