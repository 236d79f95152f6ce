package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/duraflow/duraflow/internal/paging"
)

// table writes aligned columns with text/tabwriter.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// writeJSON writes v as indented JSON, for --json.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// formatTime writes a time in UTC, to the second; "-" for none.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return formatTime(*t)
}

// compactJSON writes raw JSON on one line, "-" for none, shortened to max
// characters when max > 0.
func compactJSON(raw json.RawMessage, max int) string {
	if len(raw) == 0 {
		return "-"
	}
	var b bytes.Buffer
	s := string(raw)
	if err := json.Compact(&b, raw); err == nil {
		s = b.String()
	}
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// listPages reads a list from its current cursor: one page, or with all
// every page, calling list for each after setCursor moved the cursor on. It returns the items read and the cursor after the last
// page read ("" when there is none).
func listPages[T any](all bool, setCursor func(string), list func() ([]T, string, error)) ([]T, string, error) {
	items := []T{}
	for {
		page, next, err := list()
		if err != nil {
			return nil, "", err
		}
		items = append(items, page...)
		if next == "" || !all {
			return items, next, nil
		}
		setCursor(next)
	}
}

// pageFlags adds the flags of a paged list of noun: --page-size, --cursor
// and --all.
func pageFlags(fs *pflag.FlagSet, noun string, pageSize *int, cursor *string, all *bool) {
	fs.IntVar(pageSize, "page-size", 0, fmt.Sprintf("%s per page, 1 to %d (default %d)", noun, paging.MaxPageSize, paging.DefaultPageSize))
	fs.StringVar(cursor, "cursor", "", "continue after a previous page")
	fs.BoolVar(all, "all", false, "follow every page")
}
