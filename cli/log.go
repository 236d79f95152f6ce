package cli

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// newLogger returns the structured logger of dev, serve and worker: text
// (logfmt) or JSON lines on w, at level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError(fmt.Errorf("--log-level %q: want debug, info, warn or error", level))
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError(fmt.Errorf("--log-format %q: want text or json", format))
}
