package kubemodel_test

import (
	"math/rand/v2"

	"github.com/wasmsched/wasmsched/guest-sdk/model"
	"github.com/wasmsched/wasmsched/internal/kubemodel/modelgen"
)

// gen is the model's generator (modelgen) as these tests call it.
type gen struct{ g *modelgen.Gen }

func newGen(r *rand.Rand) gen { return gen{modelgen.New(r)} }

func (g gen) pod(name string) *model.Pod { return g.g.Pod(name) }
func (g gen) cluster() *model.Cluster    { return g.g.Cluster() }
func (g gen) countTerm() model.CountTerm { return g.g.CountTerm() }
