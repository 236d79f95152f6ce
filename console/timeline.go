package console

import (
	"fmt"
	"time"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
)

// Geometry of the timeline's SVG, in user units.
const (
	tlLabelWidth = 220
	tlBarsWidth  = 660
	tlRowHeight  = 24
	tlBarHeight  = 14
	tlAxisHeight = 24
)

// timeline is an instance run drawn on a time axis: a row per step, a bar
// per attempt, sleep, wait or retry delay.
type timeline struct {
	Start, End    time.Time
	Rows          []*tlRow
	Ticks         []tlTick
	Width, Height int
	LabelWidth    int
}

type tlRow struct {
	Name  string
	Type  string
	Y     int // top of the row
	TextY int
	BarY  int
	Bars  []*tlBar
}

// tlBar is one segment. Kind is its CSS class: attempt-complete,
// attempt-failed, running, retry, sleep, wait, invoke.
type tlBar struct {
	Kind       string
	Label      string
	From, To   time.Time
	Open       bool // still going at the time drawn
	X, W       int
	Attempt    int
	RunAttempt int
}

type tlTick struct {
	X     int
	Label string
}

// buildTimeline lays out the steps of a history. Times come from the
// history: a Do step's attempts (started, ended), the delay before each
// retry, a sleep from its start to its wake time, a wait from its start to
// the event (or now), the step attempts running now; an open bar ends at
// now.
func buildTimeline(info *dftype.InstanceInfo, h *client.History, now time.Time) *timeline {
	tl := &timeline{Start: info.CreatedAt, LabelWidth: tlLabelWidth}
	if info.StartedAt != nil && h.RunNumber == info.RunNumber && info.StartedAt.Before(tl.Start) {
		tl.Start = *info.StartedAt
	}
	end := info.UpdatedAt
	if info.CompletedAt != nil {
		end = *info.CompletedAt
	}
	open := func(t *time.Time) (time.Time, bool) {
		if t != nil {
			return *t, false
		}
		return now, true
	}
	running := map[string]*client.RunningStepInfo{}
	for _, r := range h.Running {
		running[r.Name] = r
	}
	for _, s := range h.Steps {
		row := &tlRow{Name: s.Name, Type: s.Type}
		switch s.Type {
		case "do":
			var prevEnd *time.Time
			for _, a := range s.AttemptLog {
				from := s.CreatedAt
				if a.StartedAt != nil {
					from = *a.StartedAt
				}
				if prevEnd != nil && from.After(*prevEnd) {
					row.Bars = append(row.Bars, &tlBar{Kind: "retry", Label: "retry delay", From: *prevEnd, To: from})
				}
				to, isOpen := open(a.EndedAt)
				kind := "attempt-complete"
				if a.Status == "failed" {
					kind = "attempt-failed"
				}
				label := fmt.Sprintf("attempt %d %s", a.Attempt, a.Status)
				if a.Error != nil {
					label += ": " + a.Error.Name + " " + a.Error.Message
				}
				row.Bars = append(row.Bars, &tlBar{Kind: kind, Label: label, From: from, To: to, Open: isOpen, Attempt: a.Attempt, RunAttempt: a.RunAttempt})
				prevEnd = a.EndedAt
			}
			if s.Status == "retrying" && s.NextRetryAt != nil && prevEnd != nil {
				row.Bars = append(row.Bars, &tlBar{Kind: "retry", Label: "waiting to retry", From: *prevEnd, To: *s.NextRetryAt})
			}
			if len(s.AttemptLog) == 0 {
				to, isOpen := open(s.CompletedAt)
				row.Bars = append(row.Bars, &tlBar{Kind: "attempt-" + barStatus(s.Status), Label: s.Status, From: s.CreatedAt, To: to, Open: isOpen})
			}
		case "sleep":
			to, isOpen := open(s.CompletedAt)
			if isOpen && s.WakeAt != nil {
				to = *s.WakeAt
			}
			row.Bars = append(row.Bars, &tlBar{Kind: "sleep", Label: "sleep", From: s.CreatedAt, To: to, Open: isOpen})
		case "waitForEvent":
			to, isOpen := open(s.CompletedAt)
			label := "wait for " + s.WaitEventType
			if isOpen && s.WakeAt != nil {
				label += fmt.Sprintf(" (times out %s)", s.WakeAt.UTC().Format(time.RFC3339))
			}
			row.Bars = append(row.Bars, &tlBar{Kind: "wait", Label: label, From: s.CreatedAt, To: to, Open: isOpen})
		default:
			to, isOpen := open(s.CompletedAt)
			row.Bars = append(row.Bars, &tlBar{Kind: "invoke", Label: s.Type + " " + s.Status, From: s.CreatedAt, To: to, Open: isOpen})
		}
		if r := running[s.Name]; r != nil {
			row.Bars = append(row.Bars, &tlBar{Kind: "running", Label: fmt.Sprintf("attempt %d running", r.Attempt), From: r.StartedAt, To: now, Open: true, Attempt: r.Attempt})
			delete(running, s.Name)
		}
		tl.Rows = append(tl.Rows, row)
	}
	for _, r := range h.Running {
		if running[r.Name] != nil {
			tl.Rows = append(tl.Rows, &tlRow{Name: r.Name, Type: "do", Bars: []*tlBar{{Kind: "running", Label: fmt.Sprintf("attempt %d running", r.Attempt), From: r.StartedAt, To: now, Open: true, Attempt: r.Attempt}}})
		}
	}
	for _, row := range tl.Rows {
		for _, b := range row.Bars {
			if b.From.Before(tl.Start) {
				tl.Start = b.From
			}
			if b.To.After(end) {
				end = b.To
			}
		}
	}
	if !info.Status.Terminal() && now.After(end) {
		end = now
	}
	if !end.After(tl.Start) {
		end = tl.Start.Add(time.Second)
	}
	tl.End = end
	span := float64(end.Sub(tl.Start))
	x := func(t time.Time) int { return tlLabelWidth + int(float64(t.Sub(tl.Start))/span*tlBarsWidth) }
	for i, row := range tl.Rows {
		row.Y = tlAxisHeight + i*tlRowHeight
		row.TextY = row.Y + tlRowHeight/2 + 4
		row.BarY = row.Y + (tlRowHeight-tlBarHeight)/2
		for _, b := range row.Bars {
			b.X = x(b.From)
			b.W = max(x(b.To)-b.X, 2)
		}
	}
	for i := range 5 {
		t := tl.Start.Add(time.Duration(float64(i) / 4 * span))
		tl.Ticks = append(tl.Ticks, tlTick{X: x(t), Label: "+" + t.Sub(tl.Start).Round(durationRound(end.Sub(tl.Start))).String()})
	}
	tl.Width = tlLabelWidth + tlBarsWidth + 40
	tl.Height = tlAxisHeight + len(tl.Rows)*tlRowHeight + 4
	return tl
}

// barStatus maps a step status to the bar class of a step without an
// attempt log.
func barStatus(status string) string {
	switch status {
	case "complete":
		return "complete"
	case "errored", "retrying":
		return "failed"
	}
	return "complete"
}

// durationRound is the precision of the axis labels for a span.
func durationRound(span time.Duration) time.Duration {
	switch {
	case span < time.Second:
		return time.Millisecond
	case span < time.Minute:
		return 100 * time.Millisecond
	case span < time.Hour:
		return time.Second
	}
	return time.Minute
}
