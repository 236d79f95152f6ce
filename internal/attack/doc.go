// Package attack is the attack suite ("make attack"): Go tests,
// behind the build tag attack so that plain go test skips them, that build
// the real duraflow binary (cmd/duraflow), start it on loopback and run an
// attack table against it, asserting for each attack the refusal (status and
// error code), that the server still answers (/healthz), and that nothing
// was half-written (a refused create leaves no instance, a refused flow is
// not stored).
//
// The tables:
//
//   - SSRF: http steps aimed at loopback, private, link-local, CGNAT and
//     metadata addresses, as literals, in other encodings (decimal, octal,
//     short forms), v4-mapped, with zone ids and userinfo, through names
//     that resolve to loopback and through redirects from an allow-listed
//     upstream. IP literals are refused when the flow is applied; the rest
//     when the step dials. Only loopback is ever contacted: targets that
//     are not loopback are only given as literals refused at apply time, and
//     a canary server on loopback proves that nothing got through. Rebinding
//     at dial time (a name answering public, then loopback) needs a resolver
//     the binary cannot be given, so it runs at package level with the http
//     handler of package flow.
//   - Expression bombs: transform steps that build huge ranges, strings,
//     nested values or pretty-printed JSON, and regular expressions over big
//     inputs; each instance must fail with EXPRESSION_ERROR within seconds
//     while /healthz keeps answering.
//   - Exec escapes: exec steps naming commands that are not allow-listed,
//     path tricks, shells, and config fields that do not exist (env), all
//     refused when the flow is applied; arguments with shell syntax run
//     without a shell (package level, with an allow-listed printf).
//   - Every route × every credential: no token, unknown and malformed
//     tokens, one token per scope and "*" — 401, 403 or success as the scope
//     table says. The route table must cover every route httpapi declares.
//   - A token limited to one namespace: every instance route on an
//     instance of another namespace is 404 INSTANCE_NOT_FOUND (403 when it
//     selects that namespace), changes nothing, and its lists are empty.
//     Every route that spans every namespace (schedules, workers, queues,
//     lifecycle events) is 403 to it, reads included, and answers nothing
//     of them; it fires only its namespace's triggers; its creates keep to
//     their workflow's queue, the queues --namespace-queues gives it and
//     priority 0. The child a subflow step of its instance starts lives in
//     its namespace: the other tenant (a token limited to "default")
//     neither reads it nor sends it events, and cannot make the step fail
//     by creating the id the parent's id once gave; nor can it make a
//     schedule's firing vanish by creating the ids its due times once gave.
//   - An Authorize hook that limits a tenant by RequestNamespace, as the
//     documentation suggests (package level, on each backend): every route
//     of the server but the tenant's namespace's is 403 to it, the routes
//     of every namespace whatever it selects.
//   - Bad bodies: nesting depth, size, invalid encodings, truncated JSON,
//     trailing data, and slow bodies with and without a token (401 at once
//     without one, 408 REQUEST_TIMEOUT at --body-timeout with one).
//   - Unportable payloads: invalid UTF-8, \u0000, lone surrogates and
//     numbers past float64 in params, events and schedules are 400
//     INVALID_REQUEST on both backends and write nothing; as step results
//     they end the instance alike on both; in flow definitions they are 400
//     INVALID_REQUEST too.
//   - URL templates: values in an http step's path and query reach the
//     upstream as one path segment and one query value, whatever they hold;
//     ${raw:x} passes a value through, and urlEncode escapes in a transform.
//   - Triggers: serve refuses to start with a trigger that copies a
//     credential header (Authorization, Cookie, …) into the params, unless
//     it says allowCredentialHeaders.
//   - Schedules: every schedule write needs the schedules scope; a manage
//     token is refused and changes nothing.
//   - Ids and cursors: invalid instance ids, event types, workflow names,
//     cursors and page sizes: 400 with a code, never 500.
//   - Reads: lists and histories whose pages would hold far more payload
//     than a page's byte budget (4 MiB) answer at most the budget and one
//     row more, with a cursor, and their pages together hold every row
//     once.
//   - The start: --max-body-bytes past the engine's bound, and a trigger or
//     an API prefix at /metrics or /ui (paths the command serves itself),
//     stop serve at start with a clear error.
//   - The web console: its forms are held to the server's lowered limits
//     (event type, payload, body, page size) and store nothing past them;
//     10,001 logins of one token end none of another token's sessions; 300
//     wrong tokens from one address throttle its logins (429 with
//     Retry-After, the right token's too); a login's next path cannot leave
//     /ui; the session cookie is Secure with --secure-cookies, or behind
//     --trusted-proxies that say https.
//
// Run it with make attack (go test -race -count=1 -tags attack
// ./internal/attack/...). Each test process uses SQLite files of its own;
// when DURAFLOW_TEST_DATABASE_URL names a reachable Postgres, the body and id
// tables also run against a second server on a fresh schema
// (DURAFLOW_REQUIRE_POSTGRES=1 makes an unreachable Postgres a failure).
package attack
