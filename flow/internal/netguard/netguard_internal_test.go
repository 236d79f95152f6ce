package netguard

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInternalReasonPublicAddresses(t *testing.T) {
	t.Parallel()
	p, err := NewPolicy(nil)
	require.NoError(t, err)
	for _, ip := range []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "2a00:1450:4001::200e", "64:ff9b::808:808", "2002:808:808::1"} {
		require.NoError(t, p.Check("", netip.MustParseAddr(ip)), ip)
	}
}
