package alert

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/ballast-io/ballast/models"
)

// Alert is one alert as Alertmanager sees it: labels identify it,
// annotations describe it, EndsAt is zero while it fires.
type Alert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
}

// Fingerprint identifies the alert by its labels, the way Alertmanager does
// (github.com/prometheus/common/model's label-set fingerprint), so the
// webhook payload's fingerprint matches Alertmanager's for the same labels.
func (a *Alert) Fingerprint() string {
	ls := make(model.LabelSet, len(a.Labels))
	for k, v := range a.Labels {
		ls[model.LabelName(k)] = model.LabelValue(v)
	}
	return ls.Fingerprint().String()
}

// Resolved reports whether the alert has ended at t.
func (a *Alert) Resolved(t time.Time) bool { return !a.EndsAt.IsZero() && !a.EndsAt.After(t) }

// Status is "resolved" or "firing" at t.
func (a *Alert) Status(t time.Time) string {
	if a.Resolved(t) {
		return "resolved"
	}
	return "firing"
}

// labelString renders the labels sorted, for stable ordering and keys.
func labelString(ls map[string]string) string {
	return model.LabelSet(toLabelSet(ls)).String()
}

func toLabelSet(ls map[string]string) model.LabelSet {
	out := make(model.LabelSet, len(ls))
	for k, v := range ls {
		out[model.LabelName(k)] = model.LabelValue(v)
	}
	return out
}

// Label and annotation names ballast sets.
const (
	LabelAlertname  = "alertname"
	LabelSeverity   = "severity"
	LabelCluster    = "cluster"
	LabelSubject    = "subject"
	LabelActionKind = "action_kind"
	LabelActionID   = "action_id"

	AnnotationSummary      = "summary"
	AnnotationDescription  = "description"
	AnnotationGPUHoursLost = "gpu_hours_lost"
	AnnotationWindow       = "predicted_window"
	AnnotationRunbook      = "runbook_url"
	AnnotationDashboard    = "dashboardURL"
	AnnotationFindingID    = "finding_id"
	AnnotationScore        = "score"
	AnnotationApproveURL   = "approve_url"
	AnnotationRejectURL    = "reject_url"
)

// maxDescription bounds the description annotation (the evidence list), in
// bytes; longer is cut at a rune boundary and ends with "…".
const maxDescription = 4096

// Labeler turns findings and actions into alerts with the cluster label and
// the links an operator follows: the runbook, the Grafana dashboard and
// ballast's own API as generatorURL.
type Labeler struct {
	// Cluster is the cluster label; empty leaves it out.
	Cluster string
	// ExternalURL is ballast's address as users reach it (generatorURL).
	ExternalURL string
	// GrafanaURL is the Grafana base URL; empty leaves out dashboard_url.
	GrafanaURL string
	// RunbookURL is the page whose #KIND anchors hold each kind's runbook.
	RunbookURL string
}

// subjectLabels names the label each subject kind sets. A cluster-wide
// subject sets none: the cluster label is the operator's name for it.
var subjectLabels = map[models.SubjectKind]string{
	models.SubjectDS: "ds", models.SubjectDevice: "device", models.SubjectPort: "port",
	models.SubjectStripe: "stripe", models.SubjectClient: "client", models.SubjectJob: "job",
	models.SubjectPool: "pool", models.SubjectGPU: "gpu",
}

// setSubject sets the label of s. A drive (a device subject named
// "<node>/<drive>" by the drive-health stage) sets ds and drive instead,
// as the Grafana dashboards name them (docs/grafana.md).
func setSubject(ls map[string]string, kind string, s models.Subject) {
	if s.Kind == models.SubjectDevice {
		if ds, drive, ok := strings.Cut(s.ID, "/"); ok {
			ls["ds"], ls["drive"] = ds, drive
			return
		}
	}
	if name, ok := subjectLabels[s.Kind]; ok {
		if _, set := ls[name]; !set {
			ls[name] = s.ID
		}
	}
}

// FromFinding returns the alert of f: alertname is the finding kind.
func (l *Labeler) FromFinding(f *models.Finding) Alert {
	ls := map[string]string{
		LabelAlertname: f.Kind,
		LabelSeverity:  string(f.Severity),
		LabelSubject:   f.Subject.String(),
	}
	if l.Cluster != "" {
		ls[LabelCluster] = l.Cluster
	}
	setSubject(ls, f.Kind, f.Subject)
	// Ancestors in the storage topology ("within" evidence, e.g. the DS
	// of a starved device) become labels too, so routes can match them.
	for _, e := range f.Evidence {
		if e.Name != "within" {
			continue
		}
		if k, id, ok := strings.Cut(e.Series, ":"); ok {
			setSubject(ls, f.Kind, models.Subject{Kind: models.SubjectKind(k), ID: id})
		}
	}
	an := map[string]string{
		AnnotationSummary:   f.Summary,
		AnnotationFindingID: f.ID,
		AnnotationScore:     strconv.FormatFloat(f.Score, 'g', 6, 64),
	}
	if d := describe(f.Evidence); d != "" {
		an[AnnotationDescription] = d
	}
	if v, ok := evidence(f.Evidence, "gpu_hours_lost"); ok {
		an[AnnotationGPUHoursLost] = strconv.FormatFloat(v.Value, 'f', -1, 64)
	}
	if w := window(f.Evidence, f.LastSeen); w != "" {
		an[AnnotationWindow] = w
	}
	l.links(an, f.Kind, f.Subject)
	q := url.Values{"kind": {f.Kind}, "subject": {f.Subject.String()}}
	return Alert{Labels: ls, Annotations: an, StartsAt: f.Start.UTC(), EndsAt: f.End.UTC(),
		GeneratorURL: strings.TrimRight(l.ExternalURL, "/") + "/api/v1/findings?" + q.Encode()}
}

func (l *Labeler) links(an map[string]string, kind string, s models.Subject) {
	if l.RunbookURL != "" {
		an[AnnotationRunbook] = l.RunbookURL + "#" + kind
	}
	if l.GrafanaURL != "" {
		an[AnnotationDashboard] = DashboardURL(l.GrafanaURL, kind, s)
	}
}

func evidence(es []models.Evidence, name string) (models.Evidence, bool) {
	for _, e := range es {
		if e.Name == name {
			return e, true
		}
	}
	return models.Evidence{}, false
}

// describe renders the evidence one per line: "name: value unit (note)".
func describe(es []models.Evidence) string {
	var b strings.Builder
	for _, e := range es {
		if e.Name == "within" {
			continue
		}
		fmt.Fprintf(&b, "%s: %s", e.Name, strconv.FormatFloat(e.Value, 'g', 6, 64))
		if e.Unit != "" {
			b.WriteString(" " + e.Unit)
		}
		if e.Note != "" {
			b.WriteString(" (" + e.Note + ")")
		}
		b.WriteByte('\n')
	}
	return truncate(strings.TrimSuffix(b.String(), "\n"), maxDescription)
}

// truncate cuts s to at most n bytes at a rune boundary, marking the cut
// with "…" as Alertmanager's notifiers do.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// window renders the predicted window a finding's evidence carries: a
// failure window in days (drive health), the next checkpoint window
// (checkpoint forecast) or the predicted date (capacity).
func window(es []models.Evidence, at time.Time) string {
	unix := func(v float64) string {
		sec, frac := math.Modf(v)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC().Format(time.RFC3339)
	}
	if from, ok := evidence(es, "failure_window_from"); ok {
		if to, ok := evidence(es, "failure_window_to"); ok {
			return fmt.Sprintf("%s to %s (failure expected %g–%g days after %s)",
				at.Add(days(from.Value)).UTC().Format(time.RFC3339), at.Add(days(to.Value)).UTC().Format(time.RFC3339),
				from.Value, to.Value, at.UTC().Format(time.RFC3339))
		}
	}
	if s, ok := evidence(es, "next_start"); ok {
		if e, ok := evidence(es, "next_end"); ok {
			return unix(s.Value) + " to " + unix(e.Value)
		}
	}
	if d, ok := evidence(es, "predicted_date"); ok {
		w := unix(d.Value)
		if d.Note != "" {
			w += " (" + d.Note + ")"
		}
		return w
	}
	return ""
}

func days(d float64) time.Duration { return time.Duration(d * 24 * float64(time.Hour)) }

// Action alert kinds: each state of an action an operator hears about is
// its own alertname, so a route can send approvals to one receiver and
// failures to another.
const (
	KindActionProposed         = "action_proposed"
	KindActionAwaitingApproval = "action_awaiting_approval"
	KindActionDone             = "action_done"
	KindActionFailed           = "action_failed"
	KindActionRolledBack       = "action_rolled_back"
)

// ActionKinds lists the action alert kinds.
func ActionKinds() []string {
	return []string{KindActionProposed, KindActionAwaitingApproval, KindActionDone, KindActionFailed, KindActionRolledBack}
}

// actionKind maps an action state to its alert kind and severity, and
// whether the alert stays firing for as long as the action is in that state
// (an approval waits for a person) rather than for a fixed time (events).
func actionKind(s models.ActionState) (kind string, sev models.Severity, whileInState, ok bool) {
	switch s {
	case models.ActionProposed:
		return KindActionProposed, models.SeverityInfo, false, true
	case models.ActionAwaitingApproval:
		return KindActionAwaitingApproval, models.SeverityWarning, true, true
	case models.ActionSucceeded:
		return KindActionDone, models.SeverityInfo, false, true
	case models.ActionFailed:
		return KindActionFailed, models.SeverityWarning, false, true
	case models.ActionRolledBack:
		return KindActionRolledBack, models.SeverityWarning, false, true
	}
	return "", "", false, false
}

// FromAction returns the alert for action a's current state, or false when
// its state is not one operators are told about (approved, running,
// cancelled). Events (proposed, done, failed, rolled back) fire from the
// moment the action entered the state for eventFor; awaiting approval fires
// until the action leaves that state.
func (l *Labeler) FromAction(a *models.Action, eventFor time.Duration) (Alert, bool) {
	kind, sev, whileInState, ok := actionKind(a.State)
	if !ok {
		return Alert{}, false
	}
	ls := map[string]string{
		LabelAlertname:  kind,
		LabelSeverity:   string(sev),
		LabelSubject:    a.Subject.String(),
		LabelActionKind: string(a.Kind),
		LabelActionID:   a.ID,
	}
	if l.Cluster != "" {
		ls[LabelCluster] = l.Cluster
	}
	setSubject(ls, kind, a.Subject)
	summary := fmt.Sprintf("%s %s on %s: %s", strings.ReplaceAll(string(a.Kind), "_", " "), strings.ReplaceAll(string(a.State), "_", " "), a.Subject, a.Reason)
	if a.DryRun {
		summary += " (dry run)"
	}
	an := map[string]string{AnnotationSummary: strings.TrimSuffix(summary, ": ")}
	if len(a.Params) > 0 {
		keys := make([]string, 0, len(a.Params))
		for k := range a.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s: %s\n", k, a.Params[k])
		}
		an[AnnotationDescription] = truncate(strings.TrimSuffix(b.String(), "\n"), maxDescription)
	}
	if a.FindingID != "" {
		an[AnnotationFindingID] = a.FindingID
	}
	l.links(an, kind, a.Subject)
	start := a.Updated
	if start.IsZero() {
		start = a.Created
	}
	actionURL := strings.TrimRight(l.ExternalURL, "/") + "/api/v1/actions/" + a.ID
	if kind == KindActionAwaitingApproval {
		// What an approval bot POSTs to decide (docs/actions.md).
		an[AnnotationApproveURL], an[AnnotationRejectURL] = actionURL+"/approve", actionURL+"/reject"
	}
	al := Alert{Labels: ls, Annotations: an, StartsAt: start.UTC(), GeneratorURL: actionURL}
	if !whileInState {
		al.EndsAt = start.Add(eventFor).UTC()
	}
	return al, true
}

// KindTest is the alertname of the synthetic alert `ballast alerts test`
// sends.
const KindTest = "ballast_test"

// TestNotification is a notification for receiver with one synthetic
// alert (alertname ballast_test, severity info) started at now, resolved
// at now when resolved is set.
func (l *Labeler) TestNotification(receiver string, now time.Time, resolved bool) *Notification {
	ls := map[string]string{LabelAlertname: KindTest, LabelSeverity: string(models.SeverityInfo), LabelSubject: "cluster:test"}
	if l.Cluster != "" {
		ls[LabelCluster] = l.Cluster
	}
	an := map[string]string{AnnotationSummary: "Test alert from `ballast alerts test`: this receiver is reachable. Nothing is wrong."}
	l.links(an, KindTest, models.Subject{Kind: models.SubjectCluster, ID: "test"})
	a := Alert{Labels: ls, Annotations: an, StartsAt: now.UTC(), GeneratorURL: strings.TrimRight(l.ExternalURL, "/") + "/api/v1/findings"}
	if resolved {
		a.EndsAt = now.UTC()
	}
	key, gl := groupBy(&ReceiverOptions{Name: receiver, GroupBy: []string{LabelAlertname}}, ls)
	return &Notification{Receiver: receiver, GroupKey: key, GroupLabels: gl, At: now.UTC(), Alerts: []Alert{a}}
}
