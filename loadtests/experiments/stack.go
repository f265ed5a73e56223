package experiments

// stackExperiments are the experiments that run on the shared stack
// without restarting any server of it.
func stackExperiments() []Experiment { return nil }
