package flow

// CompileCount returns how many times the registry compiled a stored
// version (Apply's own compilations are not counted).
func CompileCount(r *Registry) int64 { return r.runs.compileCount.Load() }

// ForgetCompiled empties the registry's cache of compiled versions.
func ForgetCompiled(r *Registry) {
	r.runs.mu.Lock()
	defer r.runs.mu.Unlock()
	clear(r.runs.compiles)
}
