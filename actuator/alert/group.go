package alert

import (
	"slices"
	"sort"
	"strconv"
	"time"
)

// group is one aggregation group of a webhook receiver, as Alertmanager's
// dispatcher keeps them: the alerts whose group_by labels agree, when the
// group is next flushed, and what its last notification said (Alertmanager's
// notification log), which decides whether a flush notifies.
type group struct {
	Labels map[string]string `json:"labels"`
	Alerts map[string]Alert  `json:"alerts"` // by fingerprint
	Next   time.Time         `json:"next"`
	Last   *flushLog         `json:"last,omitempty"`
}

// flushLog is the fingerprints a group's last notification reported
// firing and resolved, and when.
type flushLog struct {
	At       time.Time `json:"at"`
	Firing   []string  `json:"firing"`
	Resolved []string  `json:"resolved"`
}

// groupBy returns the group labels of ls for receiver r and the group key,
// in Alertmanager's form: route, then the group labels.
func groupBy(r *ReceiverOptions, ls map[string]string) (string, map[string]string) {
	gl := map[string]string{}
	if slices.Contains(r.GroupBy, "...") {
		for k, v := range ls {
			gl[k] = v
		}
	} else {
		for _, k := range r.GroupBy {
			if v, ok := ls[k]; ok {
				gl[k] = v
			}
		}
	}
	return "{}/{receiver=" + strconv.Quote(r.Name) + "}:" + labelString(gl), gl
}

// insert adds or updates a firing alert. A new group waits group_wait
// before its first flush, unless the alert is already older than that
// (Alertmanager flushes such a group at once).
func (g *group) insert(fp string, a Alert, now time.Time, wait time.Duration) {
	if g.Next.IsZero() {
		g.Next = now.Add(wait)
		if !a.StartsAt.Add(wait).After(now) {
			g.Next = now
		}
	}
	g.Alerts[fp] = a
}

// flush runs when the group is due: it returns the alerts to notify (nil
// when nothing needs saying), records the notification, drops resolved
// alerts and schedules the next flush.
func (g *group) flush(now time.Time, r *ReceiverOptions) []Alert {
	var firing, resolved []string
	for fp, a := range g.Alerts {
		if a.Resolved(now) {
			resolved = append(resolved, fp)
		} else {
			firing = append(firing, fp)
		}
	}
	sort.Strings(firing)
	sort.Strings(resolved)
	var out []Alert
	if needsUpdate(g.Last, firing, resolved, r.SendResolved, r.RepeatInterval, now) {
		for _, fp := range firing {
			out = append(out, g.Alerts[fp])
		}
		if r.SendResolved {
			for _, fp := range resolved {
				out = append(out, g.Alerts[fp])
			}
		}
		g.Last = &flushLog{At: now, Firing: firing, Resolved: resolved}
		if len(firing) == 0 && !r.SendResolved {
			out = nil // recorded as told, nothing to send
		}
		sortAlerts(out, now)
	}
	for _, fp := range resolved {
		delete(g.Alerts, fp)
	}
	g.Next = now.Add(r.GroupInterval)
	return out
}

// needsUpdate is Alertmanager's deduplication: notify a new group only
// with firing alerts; notify when an alert fires that the last
// notification did not report firing; when every alert has resolved and
// the receiver was told some fired; when send_resolved and an alert
// resolved that it was not told about; otherwise once repeat_interval has
// passed since the last notification.
func needsUpdate(last *flushLog, firing, resolved []string, sendResolved bool, repeat time.Duration, now time.Time) bool {
	if last == nil {
		return len(firing) > 0
	}
	if !subset(firing, last.Firing) {
		return true
	}
	if len(firing) == 0 {
		return len(last.Firing) > 0
	}
	if sendResolved && !subset(resolved, last.Resolved) {
		return true
	}
	return !now.Before(last.At.Add(repeat))
}

// subset reports whether every element of a (sorted) is in b (sorted).
func subset(a, b []string) bool {
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			return false
		}
	}
	return true
}
