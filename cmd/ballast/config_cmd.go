package main

import (
	"context"
	"fmt"

	"github.com/ballast-io/ballast/cluster"
)

func init() {
	register(&command{
		name:    "config check",
		summary: "validate a config file of any role and exit",
		run: func(_ context.Context, env *cmdEnv, args []string) error {
			fs := newFlagSet(env, "config check", `Usage: ballast config check FILE
       ballast config check --config FILE

Loads FILE the way its role would (the role: field picks mds, ds or client)
and runs exactly the checks that role's daemon runs before it starts:
unknown fields, bad values, collector names and URLs are rejected with the
field name and value; the files the daemon reads at start (token,
certificate and CA files, the remote store's and etcd's credentials,
alerting secrets) must be readable; and for agents the host must provide
the proc and sys roots and a node name. Exits 0 when the daemon would start with FILE. Every
field is documented in docs/config.md. --config is accepted as the daemons
take it, so a daemon's command line can be checked as it is.`)
			cfg := fs.String("config", "", "the config file (instead of FILE)")
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			file := *cfg
			switch {
			case file != "" && fs.NArg() > 0:
				return fmt.Errorf("%w: give the file once, as FILE or as --config, not both (got --config %q and %q)", errUsage, file, fs.Arg(0))
			case file == "" && fs.NArg() != 1:
				return fmt.Errorf("%w: want exactly one FILE (or --config FILE), got %d arguments", errUsage, fs.NArg())
			case file == "":
				file = fs.Arg(0)
			}
			role, err := cluster.CheckFile(file)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "%s: valid %s config\n", file, role)
			return nil
		},
	})
}
