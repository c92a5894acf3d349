package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// rolloutRun is what make bench-rollout measured: /usr/bin/time -v's
// figures for the whole command, and the report's own.
type rolloutRun struct {
	wallSeconds, userSeconds, sysSeconds float64
	peakMiB                              float64
	report                               struct {
		DurationSeconds float64 `json:"durationSeconds"`
		Snapshot        struct {
			Nodes, RunningPods, PendingPods int
		} `json:"snapshot"`
		Summary struct {
			RejectedRunning, ChangedPending, SampledPlacements, MovedPlacements int
		} `json:"summary"`
	}
}

var timeFields = map[string]*regexp.Regexp{
	"wall": regexp.MustCompile(`Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)`),
	"user": regexp.MustCompile(`User time \(seconds\): ([\d.]+)`),
	"sys":  regexp.MustCompile(`System time \(seconds\): ([\d.]+)`),
	"rss":  regexp.MustCompile(`Maximum resident set size \(kbytes\): (\d+)`),
}

// readRollout reads dir's time.txt and report.json (make bench-rollout).
func readRollout(dir string) (*rolloutRun, error) {
	t, err := os.ReadFile(filepath.Join(dir, "time.txt"))
	if err != nil {
		return nil, fmt.Errorf("%w (make bench-rollout writes it)", err)
	}
	r := &rolloutRun{}
	for name, re := range timeFields {
		m := re.FindStringSubmatch(string(t))
		if m == nil {
			return nil, fmt.Errorf("%s: no %s figure", filepath.Join(dir, "time.txt"), name)
		}
		switch name {
		case "wall":
			h, _ := strconv.ParseFloat("0"+m[1], 64)
			mi, _ := strconv.ParseFloat(m[2], 64)
			s, _ := strconv.ParseFloat(m[3], 64)
			r.wallSeconds = h*3600 + mi*60 + s
		case "user":
			r.userSeconds, _ = strconv.ParseFloat(m[1], 64)
		case "sys":
			r.sysSeconds, _ = strconv.ParseFloat(m[1], 64)
		case "rss":
			kb, _ := strconv.ParseFloat(m[1], 64)
			r.peakMiB = kb / 1024
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &r.report); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "report.json"), err)
	}
	return r, nil
}

// rollout writes the rollout report's time on the large snapshot.
func (rep *report) rollout() error {
	r, err := readRollout(filepath.Join(rep.root, "_output", "bench", "rollout"))
	if err != nil {
		return err
	}
	s := r.report.Snapshot
	rep.w("### Rollout report\n\n`wasmsched rollout-report` on a snapshot file of %d nodes, %d running and %d pending pods (`make bench-rollout`: hack/rollout-snapshot; team-isolation's config `key=team` against `key=team,spill=true,require=true`, bin-packing beside it; the default plugins; %d placements sampled). The report found %d running pods rejected where they run, %d pending pods changed and %d of the sampled placements moved.\n\n",
		s.Nodes, s.RunningPods, s.PendingPods, r.report.Summary.SampledPlacements, r.report.Summary.RejectedRunning, r.report.Summary.ChangedPending, r.report.Summary.MovedPlacements)
	rep.w("| whole command (wall) | of which the report (without reading the file) | CPU (user + system) | peak memory |\n|---|---|---|---|\n")
	rep.w("| %.1f s | %.1f s | %.1f s | %.0f MiB |\n\n", r.wallSeconds, r.report.DurationSeconds, r.userSeconds+r.sysSeconds, r.peakMiB)
	return nil
}
