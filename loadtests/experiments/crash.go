package experiments

// crashExperiments are the experiments that crash or restart a server:
// each on a private instance of its own.
func crashExperiments() []Experiment {
	return []Experiment{
		slotWALRetention(),
		unloggedQueueCrash(),
		unloggedCacheCrash(),
		synchronousCommitOffCrash(),
		postgresRestartUnderLoad(),
		noKurrentdbRestart(),
		noisyNeighbourSlot(),
	}
}
