package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/cluster/node"
	"github.com/ballast-io/ballast/models"
)

// actionsUsages is the first line of each verb's help.
var actionsUsages = map[string]string{
	"list":    "Usage: ballast actions list [--state S] [--kind K] [--subject X] [--moves | --parent ID] [--json]",
	"show":    "Usage: ballast actions show ID [--json]",
	"approve": "Usage: ballast actions approve ID [--reason TEXT] [--by NAME]",
	"reject":  "Usage: ballast actions reject ID [--reason TEXT] [--by NAME]",
	"cancel":  "Usage: ballast actions cancel ID [--reason TEXT] [--by NAME]",
}

const actionsUsage = `%s

Lists, shows and decides on the mds's remediation actions over its API
(%s, docs/actions.md). A plan (rebalance, evacuate_device, promote_spare)
groups its steps: stripe moves (move_stripe) and, in a rebalance, file
restripes (restripe_file); approve, reject and cancel apply to plans. In the
default dry-run mode plans are only proposed; in approve mode a plan waits
for 'ballast actions approve'; in auto mode it runs within the budgets.
Deciding is allowed from the mds's own host (loopback) unless the mds has
authentication (docs/security.md).`

func init() {
	for _, verb := range []string{"list", "show", "approve", "reject", "cancel"} {
		register(&command{name: "actions " + verb, summary: actionsSummary[verb], run: actionsCommand(verb)})
	}
}

var actionsSummary = map[string]string{
	"list":    "list the mds's remediation plans (or their moves)",
	"show":    "show one action with its moves",
	"approve": "approve a plan awaiting approval",
	"reject":  "reject a plan awaiting approval",
	"cancel":  "cancel an open plan (moves not yet committed are aborted)",
}

// actionsClient talks to an mds's actions API.
type actionsClient struct {
	base string
	http *http.Client
}

func (c *actionsClient) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("cannot build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the mds at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("cannot read the mds's answer: %w", err)
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	if resp.StatusCode != http.StatusOK || env.Status != "success" {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

func actionsCommand(verb string) func(context.Context, *cmdEnv, []string) error {
	return func(ctx context.Context, env *cmdEnv, args []string) error {
		fs := newFlagSet(env, "actions "+verb, fmt.Sprintf(actionsUsage, actionsUsages[verb], cluster.PathActions))
		base := fs.String("url", "http://127.0.0.1:9750", "base URL of the mds")
		timeout := fs.Duration("timeout", 30*time.Second, "limit for the request")
		var client cluster.ClientConfig
		registerClientFlags(fs, &client)
		var state, kind, subject, parent, reason, by *string
		var moves, asJSON *bool
		switch verb {
		case "list":
			state = fs.String("state", "", "only actions in this state (proposed, awaiting_approval, approved, running, verifying, succeeded, failed, rolled_back, rejected, cancelled)")
			kind = fs.String("kind", "", "only actions of this kind (rebalance, evacuate_device, promote_spare, set_read_ahead, move_stripe, restripe_file)")
			subject = fs.String("subject", "", "only actions about this subject (kind:id, id or name)")
			parent = fs.String("parent", "", "only the moves of this plan")
			moves = fs.Bool("moves", false, "list stripe moves too, not only plans")
			asJSON = fs.Bool("json", false, "print the actions as JSON")
		case "show":
			asJSON = fs.Bool("json", false, "print the action and its moves as JSON")
		default:
			reason = fs.String("reason", "", "why (journaled with the decision)")
			who := os.Getenv("USER")
			if u, err := user.Current(); err == nil && who == "" {
				who = u.Username
			}
			by = fs.String("by", who, "who decides (journaled with the decision)")
		}
		// Flags may follow the ID, as the usage lines and docs/actions.md
		// write it (approve ID --reason TEXT); the flag package stops at
		// the first argument that is not a flag, so parse on after it.
		var pos []string
		for rest := args; ; rest = fs.Args()[1:] {
			if err := parseFlags(fs, rest); err != nil {
				return err
			}
			if fs.NArg() == 0 {
				break
			}
			pos = append(pos, fs.Arg(0))
		}
		wantArgs := 1
		if verb == "list" {
			wantArgs = 0
		}
		if len(pos) != wantArgs {
			return fmt.Errorf("%w: want %d argument(s), got %q", errUsage, wantArgs, pos)
		}
		rt, err := node.NewClientTransport(client)
		if err != nil {
			return err
		}
		c := &actionsClient{base: strings.TrimRight(*base, "/"), http: &http.Client{Transport: rt}}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		switch verb {
		case "list":
			q := url.Values{}
			for k, v := range map[string]string{"state": *state, "kind": *kind, "subject": *subject, "parent": *parent} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if !*moves && *parent == "" {
				q.Set("plans", "true")
			}
			var as []models.Action
			if err := c.do(ctx, http.MethodGet, cluster.PathActions+"?"+q.Encode(), nil, &as); err != nil {
				return err
			}
			if *asJSON {
				return writeJSONTo(env.stdout, as)
			}
			printActions(env.stdout, as)
			return nil
		case "show":
			id := pos[0]
			var a models.Action
			if err := c.do(ctx, http.MethodGet, cluster.PathActions+"/"+url.PathEscape(id), nil, &a); err != nil {
				return err
			}
			var kids []models.Action
			if a.Parent == "" {
				if err := c.do(ctx, http.MethodGet, cluster.PathActions+"?parent="+url.QueryEscape(id), nil, &kids); err != nil {
					return err
				}
			}
			if *asJSON {
				return writeJSONTo(env.stdout, map[string]any{"action": a, "moves": kids})
			}
			printAction(env.stdout, &a, kids)
			return nil
		default:
			id := pos[0]
			var a models.Action
			err := c.do(ctx, http.MethodPost, cluster.PathActions+"/"+url.PathEscape(id)+"/"+verb, cluster.DecisionRequest{By: *by, Reason: *reason}, &a)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "%s: %s\n", a.ID, a.State)
			return nil
		}
	}
}

func writeJSONTo(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

func subjectOf(a *models.Action) string {
	if a.SubjectName != "" {
		return a.SubjectName
	}
	return a.Subject.String()
}

func printActions(w io.Writer, as []models.Action) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED (UTC)\tSTATE\tKIND\tSUBJECT\tMOVES\tMOVED/PLANNED\tEFFECT\tID")
	for i := range as {
		a := &as[i]
		moves, bytesCol, effect := "-", "-", "-"
		if a.Progress != nil {
			moves = fmt.Sprintf("%d/%d", a.Progress.MovesDone, a.Progress.MovesTotal)
		}
		if a.Plan != nil {
			moved := int64(0)
			if a.Progress != nil {
				moved = a.Progress.BytesMoved
			}
			bytesCol = fmt.Sprintf("%s/%s", humanBytes(moved), humanBytes(a.Plan.Bytes))
		} else if a.Move != nil {
			bytesCol = humanBytes(a.Move.Bytes)
		}
		if a.Effect != nil && a.Effect.Verdict != "" {
			effect = string(a.Effect.Verdict)
		}
		state := string(a.State)
		if a.DryRun {
			state += " (dry-run)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Created.UTC().Format("2006-01-02 15:04:05"), state, a.Kind, subjectOf(a), moves, bytesCol, effect, a.ID)
	}
	tw.Flush()
}

func printAction(w io.Writer, a *models.Action, kids []models.Action) {
	fmt.Fprintf(w, "%s\n  kind %s, subject %s, state %s", a.ID, a.Kind, subjectOf(a), a.State)
	if a.DryRun {
		fmt.Fprint(w, " (dry-run: never carried out)")
	}
	if a.Urgent {
		fmt.Fprint(w, ", urgent")
	}
	if a.Simulated {
		fmt.Fprint(w, ", SIMULATED (cluster twin)")
	}
	fmt.Fprintf(w, "\n  created %s", a.Created.UTC().Format(time.RFC3339))
	if !a.Started.IsZero() {
		fmt.Fprintf(w, ", started %s", a.Started.UTC().Format(time.RFC3339))
	}
	if !a.Finished.IsZero() {
		fmt.Fprintf(w, ", finished %s", a.Finished.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	if a.Reason != "" {
		fmt.Fprintf(w, "  reason: %s\n", a.Reason)
	}
	if a.Blocked != "" {
		fmt.Fprintf(w, "  held by %s\n", a.Blocked)
	}
	if a.Error != "" {
		fmt.Fprintf(w, "  last error: %s\n", a.Error)
	}
	if p := a.Plan; p != nil {
		fmt.Fprintf(w, "  plan: %d moves, %s (lower bound %s, cost ratio %.3f); max/mean device load %.3f → %.3f predicted (target %.2f)\n",
			p.Moves, humanBytes(p.Bytes), humanBytes(p.LowerBoundBytes), p.CostRatio, p.MaxMeanBefore, p.MaxMeanPredicted, p.MaxMeanTarget)
		for _, n := range p.Notes {
			fmt.Fprintf(w, "    note: %s\n", n)
		}
	}
	if pr := a.Progress; pr != nil {
		fmt.Fprintf(w, "  progress: %d of %d moves done, %d failed, %d cancelled; %s moved\n", pr.MovesDone, pr.MovesTotal, pr.MovesFailed, pr.MovesCancelled, humanBytes(pr.BytesMoved))
	}
	if m := a.Move; m != nil {
		fmt.Fprintf(w, "  move %s mirror %d component %d: %s → %s, %s, phase %s\n", m.File, m.Mirror, m.Component, nameOr(m.FromName, m.From), nameOr(m.ToName, m.To), humanBytes(m.Bytes), m.Phase)
	}
	if e := a.Effect; e != nil {
		fmt.Fprintf(w, "  effect (window %s): %s", e.Window, orDash(string(e.Verdict)))
		if e.Reason != "" {
			fmt.Fprintf(w, " — %s", e.Reason)
		}
		fmt.Fprintln(w)
		if e.BeforeNote != "" {
			fmt.Fprintf(w, "    %s\n", e.BeforeNote)
		}
		for _, k := range sortedKeys(e.Before) {
			after := "–"
			if v, ok := e.After[k]; ok {
				after = fmt.Sprintf("%.4g", v)
			}
			fmt.Fprintf(w, "    %-32s before %.4g  after %s\n", k, e.Before[k], after)
		}
	}
	if d := a.Decision; d != nil {
		fmt.Fprintf(w, "  %s by %s at %s: %s\n", d.Verb, orDash(d.By), d.At.UTC().Format(time.RFC3339), d.Reason)
	}
	if len(kids) > 0 {
		fmt.Fprintln(w, "  moves:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "    STATE\tPHASE\tSTRIPE\tFROM\tTO\tBYTES\tBLOCKED")
		for i := range kids {
			k := &kids[i]
			if k.Move == nil {
				continue
			}
			m := k.Move
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.State, m.Phase, subjectOf(k), nameOr(m.FromName, m.From), nameOr(m.ToName, m.To), humanBytes(m.Bytes), orDash(moveHeld(k)))
		}
		tw.Flush()
	}
}

// moveHeld says what holds move k: its guard, or for a running move
// already committed the wait before its old copy is removed (move.grace
// from its commit: clients holding the old layout finish their I/O), which
// is otherwise a move that looks stuck in phase committed.
func moveHeld(k *models.Action) string {
	if k.Blocked != "" {
		return k.Blocked
	}
	if m := k.Move; k.State == models.ActionRunning && m.Phase == models.PhaseCommitted && !m.CommittedAt.IsZero() {
		return "old copy kept for move.grace after the commit at " + m.CommittedAt.UTC().Format(time.RFC3339)
	}
	return ""
}

func nameOr(name, id string) string {
	if name != "" {
		return name
	}
	return id
}

func humanBytes(b int64) string {
	f := float64(b)
	for _, u := range []string{"B", "kB", "MB", "GB", "TB", "PB"} {
		if f < 1000 || u == "PB" {
			if u == "B" {
				return fmt.Sprintf("%d B", b)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1000
	}
	return ""
}
