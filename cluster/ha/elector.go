package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Options configure an Elector. Zero values mean the documented defaults
// (docs/config.md, ha.*).
type Options struct {
	// Endpoints are etcd client URLs; required.
	Endpoints []string
	// Prefix is the election's key prefix. Default /ballast/mds/leader.
	Prefix string
	// Name identifies this process in the election (its address, for
	// people reading `etcdctl get --prefix`); required.
	Name string
	// TTL is the lease's time to live: how long a leader that lost etcd
	// may still act is TTL minus a safety margin of TTL/4, and how long
	// the other waits before it takes over after a crash. Default 10s,
	// minimum 2s, whole seconds.
	TTL time.Duration
	// DialTimeout bounds connecting to etcd. Default 5s.
	DialTimeout time.Duration
	// Username and PasswordFile authenticate to etcd (optional).
	Username, PasswordFile string
	Logger                 *slog.Logger
	// Metrics receives ballast_ha_*; default a private set.
	Metrics *metrics.Set
}

// CheckFiles reads the password file as Start does, so that `ballast
// config check` refuses what the elector would refuse at start.
func (o *Options) CheckFiles() error {
	if o.Username == "" {
		return nil
	}
	_, err := o.password()
	return err
}

// password reads PasswordFile, trailing newlines trimmed.
func (o *Options) password() (string, error) {
	pw, err := os.ReadFile(o.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("cannot read ha.password_file %q: %w", o.PasswordFile, err)
	}
	return strings.TrimRight(string(pw), "\r\n"), nil
}

// Validate reports the first bad option, naming its config field.
func (o *Options) Validate() error {
	switch {
	case len(o.Endpoints) == 0:
		return fmt.Errorf("ha.etcd_endpoints: must list at least one etcd client URL")
	case o.Name == "":
		return fmt.Errorf("ha.name: must not be empty")
	case o.TTL != 0 && (o.TTL < 2*time.Second || o.TTL%time.Second != 0):
		return fmt.Errorf("ha.lease_ttl: %s must be whole seconds, at least 2s", o.TTL)
	case (o.Username == "") != (o.PasswordFile == ""):
		return fmt.Errorf("ha.username and ha.password_file go together")
	}
	for i, e := range o.Endpoints {
		if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			return fmt.Errorf("ha.etcd_endpoints[%d]: %q is not an http:// or https:// URL", i, e)
		}
	}
	return nil
}

func (o *Options) withDefaults() Options {
	r := *o
	if r.Prefix == "" {
		r.Prefix = "/ballast/mds/leader"
	}
	if r.TTL == 0 {
		r.TTL = 10 * time.Second
	}
	if r.DialTimeout == 0 {
		r.DialTimeout = 5 * time.Second
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.Metrics == nil {
		r.Metrics = metrics.NewSet()
	}
	return r
}

// Elector campaigns for leadership in a loop: grant a lease, campaign,
// lead while the lease is kept alive, and start over when it is lost.
type Elector struct {
	opts Options

	mu         sync.Mutex
	client     *clientv3.Client
	leading    bool
	epoch      uint64
	key        string
	lease      clientv3.LeaseID
	validUntil time.Time // monotonic: leadership may be used until then
	cancel     context.CancelFunc
	done       chan struct{}
	terms      uint64
}

var _ Confirmer = (*Elector)(nil)

// New returns an elector; it connects to nothing until Start.
func New(opts Options) (*Elector, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	e := &Elector{opts: o}
	o.Metrics.NewGauge(`ballast_ha_leader`, func() float64 {
		if _, ok := e.Leading(); ok {
			return 1
		}
		return 0
	})
	o.Metrics.NewGauge(`ballast_ha_epoch`, func() float64 {
		e.mu.Lock()
		defer e.mu.Unlock()
		return float64(e.epoch)
	})
	o.Metrics.NewGauge(`ballast_ha_terms_total`, func() float64 {
		e.mu.Lock()
		defer e.mu.Unlock()
		return float64(e.terms)
	})
	return e, nil
}

// Start connects to etcd (lazily: an unreachable etcd is retried in the
// background, and until then this process does not lead) and starts
// campaigning. Idempotent.
func (e *Elector) Start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done != nil {
		return nil
	}
	cfg := clientv3.Config{
		Endpoints:   e.opts.Endpoints,
		DialTimeout: e.opts.DialTimeout,
		Logger:      zap.NewNop(),
		// Keepalive of the gRPC connection: a silent etcd is noticed
		// within about a second, not a TCP timeout.
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
	}
	if e.opts.Username != "" {
		pw, err := e.opts.password()
		if err != nil {
			return err
		}
		cfg.Username, cfg.Password = e.opts.Username, pw
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return fmt.Errorf("cannot create etcd client for %v: %w", e.opts.Endpoints, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.client, e.cancel, e.done = c, cancel, make(chan struct{})
	go e.loop(ctx)
	return nil
}

// Leading reports whether this process leads now: it won the election and
// its lease was confirmed alive less than TTL − TTL/4 ago (by the
// monotonic clock, which keeps running while the process is stopped). A
// leader cut off from etcd thus stops acting before etcd can expire its
// lease and elect another.
func (e *Elector) Leading() (uint64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.leading || !time.Now().Before(e.validUntil) {
		return 0, false
	}
	return e.epoch, true
}

// Confirm checks with etcd (a linearizable read) that the election key of
// term epoch still exists, i.e. no one else can have been elected since.
func (e *Elector) Confirm(ctx context.Context, epoch uint64) error {
	e.mu.Lock()
	c, key, ok := e.client, e.key, e.leading && e.epoch == epoch
	e.mu.Unlock()
	if !ok || c == nil {
		return fmt.Errorf("cannot confirm epoch %d: %w", epoch, ErrNotLeader)
	}
	resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", int64(epoch))).Commit()
	if err != nil {
		return fmt.Errorf("cannot confirm epoch %d with etcd: %w", epoch, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("epoch %d is over: %w", epoch, ErrNotLeader)
	}
	return nil
}

// loop runs terms until ctx ends.
func (e *Elector) loop(ctx context.Context) {
	defer close(e.done)
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := e.term(ctx)
		e.setLeading(false, 0, "", time.Time{})
		if ctx.Err() != nil {
			return
		}
		e.opts.Logger.Warn("ha: not leading; campaigning again", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, e.opts.TTL/2)
	}
}

// term is one lease: campaign with it, lead while it lives.
func (e *Elector) term(ctx context.Context) error {
	ttl := int64(e.opts.TTL / time.Second)
	gctx, cancel := context.WithTimeout(ctx, e.opts.TTL)
	// etcd starts the lease's clock when it grants it, before its answer
	// reaches us: the term's validity counts from the request, as each
	// keepalive's does below, so a slow answer (an etcd stuck in fsync, a
	// starved process) cannot make us trust the lease past its expiry.
	asked := time.Now()
	lease, err := e.client.Grant(gctx, ttl)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot grant an etcd lease: %w", err)
	}
	tctx, cancelTerm := context.WithCancel(ctx)
	defer cancelTerm()
	sess, err := concurrency.NewSession(e.client, concurrency.WithLease(lease.ID), concurrency.WithContext(tctx))
	if err != nil {
		return fmt.Errorf("cannot open an etcd session: %w", err)
	}
	defer func() {
		// Give the lease back so that the other takes over at once
		// rather than after the TTL (best effort: etcd may be gone).
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e.client.Revoke(rctx, lease.ID)
	}()

	// Our own keepalive probe, besides the session's: each answer tells
	// how long etcd will keep the lease from when we asked.
	margin := e.opts.TTL / 4
	var mu sync.Mutex
	validUntil := asked.Add(time.Duration(lease.TTL)*time.Second - margin)
	lost := make(chan error, 1)
	go func() {
		t := time.NewTicker(e.opts.TTL / 4)
		defer t.Stop()
		for {
			select {
			case <-tctx.Done():
				return
			case <-t.C:
			}
			sent := time.Now()
			kctx, cancel := context.WithTimeout(tctx, e.opts.TTL/4)
			resp, err := e.client.KeepAliveOnce(kctx, lease.ID)
			cancel()
			if err != nil {
				if errors.Is(err, context.Canceled) && tctx.Err() != nil {
					return
				}
				mu.Lock()
				expired := !time.Now().Before(validUntil)
				mu.Unlock()
				if expired || errors.Is(err, rpctypes.ErrLeaseNotFound) {
					select {
					case lost <- fmt.Errorf("etcd lease not confirmed for %s: %w", e.opts.TTL-margin, err):
					default:
					}
					return
				}
				continue
			}
			mu.Lock()
			validUntil = sent.Add(time.Duration(resp.TTL)*time.Second - margin)
			vu := validUntil
			mu.Unlock()
			e.extend(lease.ID, vu)
		}
	}()

	el := concurrency.NewElection(sess, e.opts.Prefix)
	campaign := make(chan error, 1)
	go func() { campaign <- el.Campaign(tctx, e.opts.Name) }()
	select {
	case err := <-campaign:
		if err != nil {
			return fmt.Errorf("campaign failed: %w", err)
		}
	case err := <-lost:
		return err
	case <-sess.Done():
		return errors.New("etcd session ended while campaigning")
	case <-ctx.Done():
		return ctx.Err()
	}
	mu.Lock()
	vu := validUntil
	mu.Unlock()
	epoch := uint64(el.Rev())
	e.setLeading(true, epoch, el.Key(), vu)
	e.leaseID(lease.ID)
	e.opts.Logger.Info("ha: leading", "name", e.opts.Name, "epoch", epoch, "lease_ttl", e.opts.TTL)
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		el.Resign(rctx)
		e.opts.Logger.Warn("ha: leadership ended", "epoch", epoch)
	}()
	// Lead until the lease is lost, the session ends, or we stop. Leading
	// also turns false by itself when validUntil passes.
	for {
		select {
		case err := <-lost:
			return err
		case <-sess.Done():
			return errors.New("etcd session ended")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(e.opts.TTL / 8):
			if _, ok := e.Leading(); !ok {
				return fmt.Errorf("lease not confirmed for %s", e.opts.TTL-margin)
			}
		}
	}
}

func (e *Elector) setLeading(on bool, epoch uint64, key string, validUntil time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if on && !e.leading {
		e.terms++
	}
	e.leading, e.key, e.validUntil = on, key, validUntil
	if on {
		e.epoch = epoch
	}
	if !on {
		e.lease = 0
	}
}

func (e *Elector) leaseID(id clientv3.LeaseID) {
	e.mu.Lock()
	e.lease = id
	e.mu.Unlock()
}

// extend moves the validity of the current term forward after a
// confirmed keepalive of its lease.
func (e *Elector) extend(id clientv3.LeaseID, validUntil time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leading && e.lease == id && validUntil.After(e.validUntil) {
		e.validUntil = validUntil
	}
}

// Stop resigns (if leading), revokes the lease so that the other process
// takes over at once, and closes the etcd client. Idempotent; bounded by ctx.
func (e *Elector) Stop(ctx context.Context) error {
	e.mu.Lock()
	cancel, done, c := e.cancel, e.done, e.client
	e.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("cannot stop the ha elector: %w", ctx.Err())
	}
	e.mu.Lock()
	e.cancel, e.client = nil, nil
	e.mu.Unlock()
	return c.Close()
}
