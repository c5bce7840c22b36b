package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/ballast-io/ballast/cluster"
	"github.com/ballast-io/ballast/internal/cli"
)

// command is one `ballast` subcommand. Files of this package register their
// commands from init so that adding a command never edits main.go.
type command struct {
	// name is the words that select the command, e.g. "config check".
	name string
	// summary is the one-line description shown by `ballast --help`.
	summary string
	// run parses args (everything after the command's words) and runs.
	// It returns errUsage (wrapped or not) for bad flags or arguments.
	run func(ctx context.Context, env *cmdEnv, args []string) error
}

// cmdEnv carries the process-level streams so commands stay testable.
type cmdEnv struct {
	stdout io.Writer
	stderr io.Writer
	// now is the wall clock; nil means time.Now (tests set it).
	now func() time.Time
}

// clock returns the current time from env.now, else the wall clock.
func (e *cmdEnv) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate command " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks errors caused by how the command was called; main exits 2.
var errUsage = cli.ErrUsage

// lookup finds the longest registered command name that prefixes args.
func lookup(args []string) (*command, []string) {
	for n := min(len(args), 3); n > 0; n-- {
		if c, ok := commands[strings.Join(args[:n], " ")]; ok {
			return c, args[n:]
		}
	}
	return nil, args
}

// subcommands lists, sorted, the commands of group (those named
// "GROUP SUB…"), or none when group is no group.
func subcommands(group string) []string {
	var names []string
	for n := range commands {
		if strings.HasPrefix(n, group+" ") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func writeTopUsage(w io.Writer) {
	fmt.Fprintf(w, `ballast — telemetry and storage intelligence for pNFS clusters that feed GPUs.

Usage: ballast COMMAND [flags]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-22s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'ballast COMMAND --help' for the flags of a command.\n")
}

// newFlagSet returns a FlagSet whose --help prints usage text, then the flags
// with their defaults, to env.stdout.
func newFlagSet(env *cmdEnv, name, usage string) *flag.FlagSet {
	return cli.NewFlagSet(env.stdout, env.stderr, name, usage)
}

// parseFlags parses args with fs and maps flag errors to errUsage.
// It returns flag.ErrHelp unchanged so callers exit 0 after --help.
func parseFlags(fs *flag.FlagSet, args []string) error { return cli.ParseFlags(fs, args) }

// registerClientFlags adds the flags of a command that talks to an mds:
// a bearer token file (never the token itself: command lines are visible
// to every user of the host) and TLS files.
func registerClientFlags(fs *flag.FlagSet, c *cluster.ClientConfig) {
	fs.StringVar(&c.BearerTokenFile, "token-file", "", "file holding a bearer token with the scope the command needs (docs/security.md)")
	fs.StringVar(&c.TLS.CAFile, "ca-file", "", "PEM CA bundle that verifies an https mds (default: system roots)")
	fs.StringVar(&c.TLS.CertFile, "cert-file", "", "client certificate for mTLS (with --key-file)")
	fs.StringVar(&c.TLS.KeyFile, "key-file", "", "private key of --cert-file")
}
