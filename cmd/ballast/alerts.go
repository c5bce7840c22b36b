package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ballast-io/ballast/actuator/alert"
	"github.com/ballast-io/ballast/cluster"
)

const alertsTestUsage = `Usage: ballast alerts test --config FILE --receiver NAME [--resolve]

Sends one synthetic alert (alertname ballast_test, severity info) to the
receiver NAME of the mds config FILE, the way the mds would (same payload,
headers, bearer token, HMAC signature and TLS settings), but at once and not
through the outbox, and prints the receiver's answer. It exits 0 when the
receiver answered 2xx.

An Alertmanager keeps the test alert firing for 5 minutes unless
--resolve sends it resolved. Secrets and the receiver URL are never printed.`

func init() {
	register(&command{name: "alerts test", summary: "send a synthetic alert to one receiver and print its answer", run: runAlertsTest})
}

func runAlertsTest(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet(env, "alerts test", alertsTestUsage)
	config := fs.String("config", "", "YAML config file of the mds role (its alerting.receivers)")
	name := fs.String("receiver", "", "name of the receiver in alerting.receivers")
	resolve := fs.Bool("resolve", false, "send the test alert resolved")
	timeout := fs.Duration("timeout", 0, "bound on the attempt (default: the receiver's timeout)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *config == "" || *name == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: want --config FILE and --receiver NAME", errUsage)
	}
	cfg, err := cluster.LoadMDSConfig(*config)
	if err != nil {
		return err
	}
	ro, err := cfg.Alerting.Receiver(*name)
	if err != nil {
		return err
	}
	if *timeout > 0 {
		ro.Timeout = *timeout
	}
	lab := cfg.Alerting.Labeler(cfg.Listen)
	s, err := alert.NewSender(ro, lab.ExternalURL, 5*time.Minute)
	if err != nil {
		return fmt.Errorf("receiver %q: %w", *name, err)
	}
	now := time.Now()
	n := lab.TestNotification(*name, now, *resolve)
	resp, retryable, err := s.Send(ctx, now, fmt.Sprintf("%s/test-%d", *name, now.Unix()), n)
	if resp.StatusCode != 0 {
		fmt.Fprintf(env.stdout, "receiver %q (%s) answered %s\n", *name, ro.Type, resp.Status)
		if b := strings.TrimSpace(resp.Body); b != "" {
			fmt.Fprintln(env.stdout, b)
		}
	}
	if err != nil {
		if retryable {
			return fmt.Errorf("%w (the mds would retry this)", err)
		}
		return fmt.Errorf("%w (the mds would not retry this)", err)
	}
	return nil
}
