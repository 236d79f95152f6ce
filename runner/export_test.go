package runner

// QueuedCheckpoints returns how many checkpoints wait for a group commit
// worker, so that a test can make sure they share a batch.
func QueuedCheckpoints(r *Runner) int {
	if r.commits == nil {
		return 0
	}
	return len(r.commits.reqs)
}
