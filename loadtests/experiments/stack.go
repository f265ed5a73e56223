package experiments

import "time"

// stackExperiments are the experiments that run on the shared stack
// without restarting any server of it: each works in a scratch schema of
// its own (or on a channel of its own) and drops it afterwards.
func stackExperiments() []Experiment {
	return []Experiment{
		{Name: NotifySerializes, Run: notifySerializes, Full: 35 * time.Second, Text: notifyText}, // 16 s on the stack, as long again on PostgreSQL 18 beside it
		{Name: ListenThroughPgBouncer, Run: listenThroughPgBouncer, Full: 20 * time.Second, Text: listenText},
		{Name: CommitOrderGap, Run: commitOrderGap, Full: 15 * time.Second, Text: gapText},
		{Name: ToastRewrite, Run: toastRewrite, Full: 10 * time.Second, Text: toastText},
	}
}
