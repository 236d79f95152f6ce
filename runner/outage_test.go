package runner_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// tcpProxy forwards loopback connections to a server until it is cut: then
// it closes every connection it forwards and refuses new ones (accepts and
// closes them at once) until it is restored. Between a store and its
// database it plays a database outage that touches no one else.
type tcpProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.Cut() })
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *tcpProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) { _, _ = io.Copy(dst, src); done <- struct{}{} }
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_ = c.Close()
	_ = up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Cut drops every forwarded connection and refuses new ones.
func (p *tcpProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore forwards new connections again.
func (p *tcpProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// TestPostgresOutageStallsOnlyAsLongAsItLasts cuts a runner's store off
// from Postgres for a few seconds while the steps of its instances finish,
// so that every checkpoint fails, and requires the instances to go on
// within a few seconds of the database's return, not a lease (30 seconds)
// later, with no step run twice.
func TestPostgresOutageStallsOnlyAsLongAsItLasts(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.DatabaseURL())
	if err != nil || u.Host == "" {
		t.Skip("the test database is not named by a URL with a host")
	}
	proxy := startProxy(t, u.Host)
	u.Host = proxy.addr()
	store := pgtest.NewStore(t, pgtest.WithDatabaseURL(u.String()))

	const instances = 20
	var a, b, c, inB atomic.Int32
	gate := make(chan struct{})
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
		for _, s := range []struct {
			name  string
			calls *atomic.Int32
		}{{"a", &a}, {"b", &b}, {"c", &c}} {
			_, err := workflow.Do(step, s.name, func(ctx context.Context) (int, error) {
				s.calls.Add(1)
				if s.name == "b" {
					inB.Add(1)
					<-gate
				}
				return 1, nil
			})
			if err != nil {
				return 0, err
			}
		}
		return 3, nil
	})
	r, err := runner.New(&runner.Config{Store: store, Registry: reg, Logger: quietLogger, PollInterval: 200 * time.Millisecond})
	require.NoError(t, err)
	cl, err := client.New(&client.Config{Store: store, Registry: reg})
	require.NoError(t, err)
	ctx := context.Background()
	reqs := make([]dftype.CreateRequest, instances)
	for i := range reqs {
		reqs[i].ID = string(rune('a'+i%26)) + string(rune('0'+i/26))
	}
	_, err = cl.CreateBatch(ctx, "w", reqs)
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, r.Stop(stopCtx))
	})
	require.Eventually(t, func() bool { return inB.Load() == instances }, 20*time.Second, 10*time.Millisecond,
		"every instance runs its step b")

	// The database goes away, and the steps in flight finish meanwhile:
	// their checkpoints fail until it is back.
	proxy.Cut()
	close(gate)
	const outage = 2500 * time.Millisecond
	<-time.After(outage)
	proxy.Restore()
	restored := time.Now()

	require.Eventually(t, func() bool {
		page, err := cl.List(ctx, client.ListParams{WorkflowName: "w", Statuses: []dftype.InstanceStatus{dftype.StatusComplete}, PageSize: 100})
		return err == nil && len(page.Instances) == instances
	}, 10*time.Second, 20*time.Millisecond, "the instances go on within seconds of the database's return, not a lease later")
	t.Logf("every instance complete %s after a %s outage ended", time.Since(restored).Round(time.Millisecond), outage)
	require.Equal(t, int32(instances), a.Load())
	require.Equal(t, int32(instances), b.Load(), "no step ran twice")
	require.Equal(t, int32(instances), c.Load())
	require.Equal(t, int64(instances), r.Claimed(), "no task was claimed twice")
}
