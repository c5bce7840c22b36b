package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ballast-io/ballast/models"
)

// Journal is the durable record of findings and actions: a bbolt database
// (one file, copy-on-write B+tree, fsync per transaction), so a crash never
// loses an acknowledged write nor leaves a torn one.
type Journal struct {
	db *bolt.DB
}

var (
	bucketFindings = []byte("findings")
	bucketActions  = []byte("actions")
)

// OpenJournal opens or creates DIR/journal.db.
func OpenJournal(dir string) (*Journal, error) {
	path := filepath.Join(dir, "journal.db")
	db, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("cannot open journal %q: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketFindings, bucketActions} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot initialise journal %q: %w", path, err)
	}
	return &Journal{db: db}, nil
}

// Close closes the database. Idempotent.
func (j *Journal) Close() error {
	if j == nil || j.db == nil {
		return nil
	}
	err := j.db.Close()
	j.db = nil
	return err
}

// UpsertFindings stores fs in one transaction, replacing earlier versions
// with the same id but keeping the earliest start.
func (j *Journal) UpsertFindings(fs []models.Finding) error {
	for i := range fs {
		if err := fs[i].Validate(); err != nil {
			return fmt.Errorf("cannot journal finding: %w", err)
		}
	}
	return j.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketFindings)
		for _, f := range fs {
			if old := b.Get([]byte(f.ID)); old != nil {
				var prev models.Finding
				if json.Unmarshal(old, &prev) == nil && prev.Start.Before(f.Start) {
					f.Start = prev.Start
				}
			}
			v, err := json.Marshal(f)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(f.ID), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// FindingFilter selects findings; zero fields match everything.
type FindingFilter struct {
	Kind    string
	Subject string // "kind:id" or just the id
	// Active: nil any, true only active, false only ended.
	Active *bool
	// Since keeps findings last seen at or after it.
	Since time.Time
}

func (f *FindingFilter) match(x *models.Finding) bool {
	if f.Kind != "" && x.Kind != f.Kind {
		return false
	}
	if f.Subject != "" && x.Subject.String() != f.Subject && x.Subject.ID != f.Subject {
		return false
	}
	if f.Active != nil && x.Active() != *f.Active {
		return false
	}
	if !f.Since.IsZero() && x.LastSeen.Before(f.Since) {
		return false
	}
	return true
}

// Findings returns the matching findings ordered by start, then id.
func (j *Journal) Findings(filter FindingFilter) ([]models.Finding, error) {
	var out []models.Finding
	err := j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketFindings).ForEach(func(k, v []byte) error {
			var f models.Finding
			if err := json.Unmarshal(v, &f); err != nil {
				return fmt.Errorf("finding %q is corrupt: %w", k, err)
			}
			if filter.match(&f) {
				out = append(out, f)
			}
			return nil
		})
	})
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Start.Equal(out[b].Start) {
			return out[a].Start.Before(out[b].Start)
		}
		return out[a].ID < out[b].ID
	})
	return out, err
}

// PutAction stores a (by its deterministic id), replacing an earlier state.
func (j *Journal) PutAction(a models.Action) error { return j.PutActions([]models.Action{a}) }

// PutActions stores as in one transaction (one fsync): all or none.
func (j *Journal) PutActions(as []models.Action) error {
	vs := make([][]byte, len(as))
	for i := range as {
		if err := as[i].Validate(); err != nil {
			return fmt.Errorf("cannot journal action: %w", err)
		}
		v, err := json.Marshal(&as[i])
		if err != nil {
			return fmt.Errorf("cannot journal action %q: %w", as[i].ID, err)
		}
		vs[i] = v
	}
	return j.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketActions)
		for i := range as {
			if err := b.Put([]byte(as[i].ID), vs[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// ErrNoAction is returned by Action for an unknown id.
var ErrNoAction = errors.New("no such action")

// Action returns the action with id.
func (j *Journal) Action(id string) (models.Action, error) {
	var a models.Action
	err := j.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketActions).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("%w: %q", ErrNoAction, id)
		}
		return json.Unmarshal(v, &a)
	})
	return a, err
}

// ActionFilter selects actions; zero fields match everything.
type ActionFilter struct {
	State   models.ActionState
	Kind    models.ActionKind
	Subject string // "kind:id", the id, or the subject's display name
	Parent  string
	// Plans keeps only actions without a parent (plans and lone actions).
	Plans bool
	// Since keeps actions updated at or after it.
	Since time.Time
}

// Match reports whether a passes the filter.
func (f *ActionFilter) Match(a *models.Action) bool {
	switch {
	case f.State != "" && a.State != f.State,
		f.Kind != "" && a.Kind != f.Kind,
		f.Subject != "" && a.Subject.String() != f.Subject && a.Subject.ID != f.Subject && a.SubjectName != f.Subject,
		f.Parent != "" && a.Parent != f.Parent,
		f.Plans && a.Parent != "",
		!f.Since.IsZero() && a.Updated.Before(f.Since):
		return false
	}
	return true
}

// Actions returns the journaled actions that pass filter, ordered by
// creation, then id.
func (j *Journal) Actions(filter ActionFilter) ([]models.Action, error) {
	var out []models.Action
	err := j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketActions).ForEach(func(k, v []byte) error {
			var a models.Action
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("action %q is corrupt: %w", k, err)
			}
			if filter.Match(&a) {
				out = append(out, a)
			}
			return nil
		})
	})
	SortActions(out)
	return out, err
}

// SortActions orders actions by creation, then id.
func SortActions(as []models.Action) {
	sort.Slice(as, func(a, b int) bool {
		if !as[a].Created.Equal(as[b].Created) {
			return as[a].Created.Before(as[b].Created)
		}
		return as[a].ID < as[b].ID
	})
}

// ParseActionFilter reads state, kind, subject, parent, plans and since
// from URL query values, naming the bad parameter on error.
func ParseActionFilter(get func(string) string) (ActionFilter, error) {
	f := ActionFilter{State: models.ActionState(get("state")), Kind: models.ActionKind(get("kind")), Subject: get("subject"), Parent: get("parent")}
	if f.State != "" && !f.State.Valid() {
		return f, fmt.Errorf("state=%q: not an action state", f.State)
	}
	if f.Kind != "" && !f.Kind.Valid() {
		return f, fmt.Errorf("kind=%q: not an action kind (one of %v)", f.Kind, models.ActionKinds)
	}
	switch p := strings.ToLower(get("plans")); p {
	case "", "false", "0":
	case "true", "1":
		f.Plans = true
	default:
		return f, fmt.Errorf("plans=%q: want true or false", p)
	}
	if s := get("since"); s != "" {
		t, err := parseAPITime(s)
		if err != nil {
			return f, fmt.Errorf("since=%q: %w", s, err)
		}
		f.Since = t
	}
	return f, nil
}

// ParseFindingFilter reads kind, subject, active and since from URL query
// values, naming the bad parameter on error.
func ParseFindingFilter(get func(string) string) (FindingFilter, error) {
	f := FindingFilter{Kind: get("kind"), Subject: get("subject")}
	switch a := strings.ToLower(get("active")); a {
	case "":
	case "true", "1":
		t := true
		f.Active = &t
	case "false", "0":
		t := false
		f.Active = &t
	default:
		return f, fmt.Errorf("active=%q: want true or false", a)
	}
	if s := get("since"); s != "" {
		t, err := parseAPITime(s)
		if err != nil {
			return f, fmt.Errorf("since=%q: %w", s, err)
		}
		f.Since = t
	}
	return f, nil
}

// parseAPITime accepts RFC 3339 or Unix seconds, as the Prometheus API does.
func parseAPITime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if sec, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Unix(0, int64(sec*1e9)).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("want RFC 3339 or Unix seconds")
}
