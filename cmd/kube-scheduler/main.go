// Command kube-scheduler is the upstream kube-scheduler (k8s.io/kubernetes
// v1.34) with the WasmPolicy plugin and the sigs.k8s.io/scheduler-plugins
// plugins registered. Configure it with a KubeSchedulerConfiguration file
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
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme" // typed args of scheduler-plugins
	"sigs.k8s.io/scheduler-plugins/pkg/capacityscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/networkaware/networkoverhead"
	"sigs.k8s.io/scheduler-plugins/pkg/networkaware/topologicalsort"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesources"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology"
	"sigs.k8s.io/scheduler-plugins/pkg/podstate"
	"sigs.k8s.io/scheduler-plugins/pkg/preemptiontoleration"
	"sigs.k8s.io/scheduler-plugins/pkg/qos"
	"sigs.k8s.io/scheduler-plugins/pkg/sysched"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/loadvariationriskbalancing"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/lowriskovercommitment"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/peaks"
	"sigs.k8s.io/scheduler-plugins/pkg/trimaran/targetloadpacking"

	"github.com/wasmsched/wasmsched/pkg/apis/config"
	_ "github.com/wasmsched/wasmsched/pkg/apis/config/scheme" // typed WasmPolicyArgs
	"github.com/wasmsched/wasmsched/pkg/apis/config/validation"
	"github.com/wasmsched/wasmsched/pkg/wasmpolicy"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func main() {
	cmd := app.NewSchedulerCommand(
		app.WithPlugin(wasmpolicy.Name, wasmpolicy.New),
		app.WithPlugin(capacityscheduling.Name, capacityscheduling.New),
		app.WithPlugin(coscheduling.Name, coscheduling.New),
		app.WithPlugin(loadvariationriskbalancing.Name, loadvariationriskbalancing.New),
		app.WithPlugin(networkoverhead.Name, networkoverhead.New),
		app.WithPlugin(topologicalsort.Name, topologicalsort.New),
		app.WithPlugin(noderesources.AllocatableName, noderesources.NewAllocatable),
		app.WithPlugin(noderesourcetopology.Name, noderesourcetopology.New),
		app.WithPlugin(preemptiontoleration.Name, preemptiontoleration.New),
		app.WithPlugin(targetloadpacking.Name, targetloadpacking.New),
		app.WithPlugin(lowriskovercommitment.Name, lowriskovercommitment.New),
		app.WithPlugin(podstate.Name, podstate.New),
		app.WithPlugin(qos.Name, qos.New),
		app.WithPlugin(sysched.Name, sysched.New),
		app.WithPlugin(peaks.Name, peaks.New),
	)
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
