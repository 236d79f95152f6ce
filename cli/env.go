package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/duraflow/duraflow/dftype"
)

// envAnnotation is the flag annotation naming the environment variable a
// flag falls back to.
const envAnnotation = "duraflow_env"

// bindEnv makes flag name of fs fall back to the environment variable env
// when it is not given on the command line, and says so in the help.
func bindEnv(fs *pflag.FlagSet, name, env string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("cli: no flag " + name)
	}
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[envAnnotation] = []string{env}
	f.Usage += " [$" + env + "]"
}

// applyEnv sets every flag of cmd that was not given on the command line
// from its environment variable, if that is set. A list flag (a repeatable
// one, such as --token) takes a list separated by whitespace or ';'.
func applyEnv(cmd *cobra.Command, lookup func(string) (string, bool)) error {
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[envAnnotation]
		if firstErr != nil || len(env) == 0 || f.Changed {
			return
		}
		v, ok := lookup(env[0])
		if !ok {
			return
		}
		if _, isList := f.Value.(pflag.SliceValue); isList {
			for _, item := range splitList(v) {
				if err := f.Value.Set(item); err != nil {
					firstErr = usageError(fmt.Errorf("$%s: %w", env[0], err))
					return
				}
			}
			return
		}
		if err := f.Value.Set(v); err != nil {
			firstErr = usageError(fmt.Errorf("$%s=%q: %w", env[0], v, err))
		}
	})
	return firstErr
}

// splitList splits a list of values separated by whitespace or ';'.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ';' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
}

// durationValue is a duration flag that reads Go durations ("500ms") and
// Duraflow's ("10 seconds").
type durationValue time.Duration

func newDurationValue(p *time.Duration, def time.Duration) *durationValue {
	*p = def
	return (*durationValue)(p)
}

func (d *durationValue) Set(s string) error {
	v, err := dftype.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) Type() string { return "duration" }

func (d *durationValue) String() string { return time.Duration(*d).String() }
