package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/duraflow/duraflow/db/dburl"
)

func newMigrateCommand(o *Options) *cobra.Command {
	var (
		databaseURL string
		asJSON      bool
	)
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply or list the database migrations",
		Long: `migrate applies the embedded migrations of the database's backend (up), or
lists them with whether each is applied (status). dev, serve and worker
migrate on start unless --migrate=false; use migrate up to do it as a
separate deployment step. Concurrent runs are safe: on Postgres they take a
session lock.`,
		Args: args(cobra.NoArgs),
		RunE: groupHelp,
	}
	cmd.PersistentFlags().StringVar(&databaseURL, "db", "./duraflow.db", "database URL: postgres://…, sqlite:path, a bare path, or sqlite::memory:")
	bindEnv(cmd.PersistentFlags(), "db", "DURAFLOW_DATABASE_URL")

	up := &cobra.Command{
		Use:   "up",
		Short: "Apply pending migrations",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return hostError(migrateUp(cmd, o, databaseURL))
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "List the migrations and whether each is applied",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return hostError(migrateStatus(cmd, o, databaseURL, asJSON))
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	cmd.AddCommand(up, status)
	return cmd
}

func migrateUp(cmd *cobra.Command, o *Options, databaseURL string) error {
	s, _, err := openStore(cmd.Context(), databaseURL, "", "")
	if err != nil {
		return err
	}
	defer s.Close()
	before, err := dburl.MigrateStatus(cmd.Context(), s)
	if err != nil {
		return err
	}
	if err := dburl.Migrate(cmd.Context(), s); err != nil {
		return fmt.Errorf("migrating %s: %w", redactURL(databaseURL), err)
	}
	applied := 0
	for _, m := range before {
		if !m.Applied {
			applied++
			fmt.Fprintf(o.Stdout, "applied %s\n", m.Name)
		}
	}
	fmt.Fprintf(o.Stdout, "%s is up to date (%d migration(s) applied now, %d in all)\n", redactURL(databaseURL), applied, len(before))
	return nil
}

// migrationJSON is one migration in the output of migrate status --json.
type migrationJSON struct {
	Version   int64      `json:"version"`
	Name      string     `json:"name"`
	Applied   bool       `json:"applied"`
	AppliedAt *time.Time `json:"appliedAt,omitempty"`
}

func migrateStatus(cmd *cobra.Command, o *Options, databaseURL string, asJSON bool) error {
	s, _, err := openStore(cmd.Context(), databaseURL, "", "")
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := dburl.MigrateStatus(cmd.Context(), s)
	if err != nil {
		return err
	}
	if asJSON {
		rows := make([]migrationJSON, len(st))
		for i, m := range st {
			rows[i] = migrationJSON{Version: m.Version, Name: m.Name, Applied: m.Applied}
			if m.Applied && !m.AppliedAt.IsZero() {
				at := m.AppliedAt
				rows[i].AppliedAt = &at
			}
		}
		return writeJSON(o.Stdout, map[string]any{"migrations": rows})
	}
	t := newTable(o.Stdout, "VERSION", "NAME", "APPLIED", "APPLIED AT")
	pending := 0
	for _, m := range st {
		applied, at := "no", "-"
		if m.Applied {
			applied = "yes"
			at = formatTime(m.AppliedAt)
		} else {
			pending++
		}
		t.row(fmt.Sprint(m.Version), m.Name, applied, at)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if pending > 0 {
		fmt.Fprintf(o.Stdout, "%d pending: run migrate up\n", pending)
	}
	return nil
}
