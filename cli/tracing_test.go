package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTracingEnabled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env     map[string]string
		want    bool
		wantErr bool
	}{
		{env: nil, want: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: false},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: true},
	} {
		got, err := tracingEnabled(func(k string) string { return tc.env[k] })
		if tc.wantErr {
			require.Error(t, err, "%v", tc.env)
			continue
		}
		require.NoError(t, err, "%v", tc.env)
		require.Equal(t, tc.want, got, "%v", tc.env)
	}
}
