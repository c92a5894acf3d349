// Command kube-scheduler is the upstream kube-scheduler (k8s.io/kubernetes
// at the version of the build line's module file) with the WasmPolicy plugin
// and the sigs.k8s.io/scheduler-plugins plugins that compile against that
// version registered (zz_generated.schedulerplugins*.go, hack/bump-k8s.sh). Configure it with a KubeSchedulerConfiguration file
// (--config) whose pluginConfig has a WasmPolicy entry.
package main

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // build info on /metrics
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	_ "github.com/wasmsched/wasmsched/pkg/apis/config/scheme" // typed WasmPolicyArgs
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func main() {
	opts := append([]app.Option{app.WithPlugin(wasmpolicy.Name, wasmpolicy.New)}, schedulerPlugins...)
	cmd := app.NewSchedulerCommand(opts...)
	validateFirst(cmd)
	os.Exit(cli.Run(cmd))
}

// validateFirst checks every WasmPolicy pluginConfig of the --config file
// before the scheduler starts, so invalid args fail fast with their exact
// field path (profiles[i].pluginConfig[j].args...), which the plugin factory
// alone cannot know.
func validateFirst(cmd *cobra.Command) {
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if f := c.Flags().Lookup("config"); f != nil && f.Value.String() != "" {
			cfg, err := options.LoadConfigFromFile(klog.Background(), f.Value.String())
			if err != nil {
				return err
			}
			var errs field.ErrorList
			for i, prof := range cfg.Profiles {
				for j, pc := range prof.PluginConfig {
					if pc.Name != wasmpolicy.Name {
						continue
					}
					path := field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j).Child("args")
					a, ok := pc.Args.(*config.WasmPolicyArgs)
					if !ok {
						a, err = wasmpolicy.DecodeArgs(pc.Args)
						if err != nil {
							errs = append(errs, field.Invalid(path, "", err.Error()))
							continue
						}
					}
					errs = append(errs, validation.ValidateWasmPolicyArgs(path, a)...)
				}
			}
			if len(errs) > 0 {
				return errs.ToAggregate()
			}
		}
		return run(c, args)
	}
}
