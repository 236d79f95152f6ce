package bench_test

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/bench"
)

func TestParseWorkloads(t *testing.T) {
	t.Parallel()

	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "empty", want: []string{"empty"}},
		{in: " Steps10 , wake,steps10", want: []string{"steps10", "wake"}},
		{in: "all", want: []string{"create", "empty", "keyed", "soak", "steps10", "wake"}},
		{in: "empty,,", want: []string{"empty"}},
		{in: "", wantErr: "no workload"},
		{in: "empty,fast", wantErr: `unknown workload "fast"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := bench.ParseWorkloads(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()

	c := (&bench.Config{DatabaseURL: "sqlite"}).WithDefaults()
	require.Equal(t, bench.DefaultWorkloads, c.Workloads)
	require.Equal(t, 64, c.Concurrency)
	require.Equal(t, 1, c.Runners)
	require.Equal(t, time.Minute, c.Duration)
	require.Equal(t, 6*time.Second, c.Interval, "a tenth of a short soak")
	require.Equal(t, 100, c.Batch)
	require.Equal(t, 256, c.InFlight, "4 × concurrency × runners")
	require.Equal(t, 5*time.Second, c.CeilingDuration)
	require.Equal(t, 8, c.CeilingClients)
	require.NoError(t, c.Validate())

	long := (&bench.Config{DatabaseURL: "sqlite", Duration: 10 * time.Minute, Concurrency: 32, Runners: 2}).WithDefaults()
	require.Equal(t, time.Minute, long.Interval)
	require.Equal(t, 256, long.InFlight)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()

	worker := func([]string) *exec.Cmd { return exec.Command("true") }
	tests := []struct {
		name    string
		change  func(c *bench.Config)
		wantErr string
	}{
		{"no database", func(c *bench.Config) { c.DatabaseURL = " " }, "database URL is required"},
		{"in-memory SQLite", func(c *bench.Config) { c.DatabaseURL = "sqlite::memory:" }, "in-memory"},
		{"unknown workload", func(c *bench.Config) { c.Workloads = []string{"fast"} }, `unknown workload "fast"`},
		{"workload twice", func(c *bench.Config) { c.Workloads = []string{"empty", "empty"} }, "named twice"},
		{"negative n", func(c *bench.Config) { c.N = -1 }, "must not be negative"},
		{"no concurrency", func(c *bench.Config) { c.Concurrency = -1 }, "concurrency"},
		{"no runners", func(c *bench.Config) { c.Runners = -2 }, "runners"},
		{"too many runners", func(c *bench.Config) { c.Runners = 65; c.WorkerCommand = worker }, "at most 64"},
		{"short soak", func(c *bench.Config) { c.Duration = time.Millisecond }, "duration"},
		{"interval longer than the soak", func(c *bench.Config) { c.Duration, c.Interval = 10*time.Second, 20*time.Second }, "interval"},
		{"batch over 100", func(c *bench.Config) { c.Batch = 101 }, "batch"},
		{"short ceiling", func(c *bench.Config) { c.CeilingDuration = time.Millisecond }, "ceiling duration"},
		{"negative maintenance", func(c *bench.Config) { c.Maintenance = -time.Second }, "maintenance"},
		{"maintenance too often", func(c *bench.Config) { c.Maintenance = time.Millisecond }, "maintenance"},
		{"workers without a command", func(c *bench.Config) { c.Runners = 2 }, "WorkerCommand"},
		{"external runners without a command", func(c *bench.Config) { c.ExternalRunners = true }, "WorkerCommand"},
		{"workers with a command", func(c *bench.Config) { c.Runners = 3; c.WorkerCommand = worker }, ""},
		{"defaults", func(*bench.Config) {}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &bench.Config{DatabaseURL: "sqlite"}
			tt.change(c)
			err := c.WithDefaults().Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
