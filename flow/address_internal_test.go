package flow

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDialerControlHook checks the last line of defence on its own: the
// default dialer's Control hook refuses an internal socket address even when
// the resolver-level check is bypassed.
func TestDialerControlHook(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	h, err := NewHTTPHandler(nil)
	require.NoError(t, err)
	_, err = h.dial(context.Background(), "tcp", l.Addr().String(), "innocent.example", false)
	var ae *AddressNotAllowedError
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, "loopback", ae.Reason)
	require.Equal(t, "innocent.example", ae.Host)

	allowed, err := NewHTTPHandler(&HTTPHandlerConfig{Allow: []string{"127.0.0.1"}})
	require.NoError(t, err)
	conn, err := allowed.dial(context.Background(), "tcp", l.Addr().String(), "127.0.0.1", false)
	require.NoError(t, err)
	conn.Close()
}
