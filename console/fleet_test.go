package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/console"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
)

// The schedules and workers pages span every namespace, as GET /schedules
// and /workers of the API do: a session limited to namespaces (a token's,
// or one an AuthorizeFunc limits by RequestNamespace) is refused them, and
// sees no other tenant's schedule params; an unlimited reader sees them.
func TestNamespaceLimitedSessionSeesNoFleetPages(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		tenant := func(r *http.Request, action httpapi.Action) error {
			switch r.Header.Get("Authorization") {
			case "Bearer " + readSecret:
				return nil
			case "Bearer tenant":
				ns, err := httpapi.RequestNamespace(r)
				if err != nil {
					return err
				}
				// The login form selects no namespace; every page does.
				if ns == "" && r.URL.Path == console.Path+"/login" {
					return nil
				}
				if ns != "acme" {
					return fmt.Errorf("%w: namespace %q", httpapi.ErrForbidden, ns)
				}
				return nil
			}
			return httpapi.ErrUnauthorized
		}
		for name, configure := range map[string]func(*console.Config){
			"tokens":    func(cfg *console.Config) { cfg.Tokens = testTokens(t) },
			"authorize": func(cfg *console.Config) { cfg.Authorize = tenant },
		} {
			b := setupWith(t, backend, configure)
			_, err := b.sched.Create(b.ctx, schedule.CreateRequest{
				ID: "payroll", WorkflowName: "greet", Cron: "0 1 * * *", Params: json.RawMessage(`{"secret":"of default"}`),
			})
			require.NoError(t, err)

			limited, limitedSecret, query := b.browser(t), acmeSecret, ""
			if name == "authorize" {
				limitedSecret, query = "tenant", "?namespace=acme"
			}
			require.Equal(t, http.StatusSeeOther, limited.login(limitedSecret).status, name)
			for _, page := range []string{"/ui/schedules", "/ui/workers"} {
				a := limited.get(page+query).requireStatus(t, http.StatusForbidden)
				require.NotContains(t, a.body, "payroll", "%s %s", name, page)
				require.NotContains(t, a.body, "of default", "%s %s", name, page)
			}
			require.NotContains(t, limited.get("/ui/"+query).requireStatus(t, http.StatusOK).body, "workers online", name)

			reader := b.browser(t)
			require.Equal(t, http.StatusSeeOther, reader.login(readSecret).status, name)
			require.Contains(t, reader.get("/ui/schedules").requireStatus(t, http.StatusOK).body, "payroll", name)
			reader.get("/ui/workers").requireStatus(t, http.StatusOK)
		}
	})
}
