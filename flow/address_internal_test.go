package flow

import (
	"context"
	"errors"
	"net"
	"net/netip"
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

func TestInternalReasonPublicAddresses(t *testing.T) {
	t.Parallel()
	p, err := newAddressPolicy(nil)
	require.NoError(t, err)
	for _, ip := range []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "2a00:1450:4001::200e", "64:ff9b::808:808", "2002:808:808::1"} {
		require.NoError(t, p.check("", netip.MustParseAddr(ip)), ip)
	}
}
