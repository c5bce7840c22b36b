// Command ballast is the one binary of ballast: the mds, ds and client
// roles, the demo on the cluster twin, and operator tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ballast-io/ballast/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], &cmdEnv{stdout: os.Stdout, stderr: os.Stderr}))
}

// run dispatches to a command and maps its error to an exit code:
// 0 success or --help, 2 usage error, 1 anything else.
func run(args []string, env *cmdEnv) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		writeTopUsage(env.stdout)
		return 0
	}
	c, rest := lookup(args)
	if c == nil && len(subcommands(args[0])) > 0 {
		// A group such as "actions": name its subcommands.
		w, code := env.stderr, 2
		if len(args) > 1 && (args[1] == "-h" || args[1] == "--help" || args[1] == "help") {
			w, code = env.stdout, 0
		} else if len(args) == 1 {
			fmt.Fprintf(w, "ballast %s: needs a subcommand\n\n", args[0])
		} else {
			fmt.Fprintf(w, "ballast %s: unknown subcommand %q\n\n", args[0], args[1])
		}
		fmt.Fprintf(w, "Usage: ballast %s SUBCOMMAND [flags]\n\nSubcommands:\n", args[0])
		for _, n := range subcommands(args[0]) {
			fmt.Fprintf(w, "  %-22s %s\n", n, commands[n].summary)
		}
		fmt.Fprintf(w, "\nRun 'ballast %s SUBCOMMAND --help' for its flags.\n", args[0])
		return code
	}
	if c == nil {
		fmt.Fprintf(env.stderr, "ballast: unknown command %q\n\n", strings.Join(args, " "))
		writeTopUsage(env.stderr)
		return 2
	}
	ctx, stop := cli.SignalContext("ballast")
	defer stop()
	err := c.run(ctx, env, rest)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(env.stderr, "ballast %s: %v\nRun 'ballast %s --help' for usage.\n", c.name, err, c.name)
		return 2
	default:
		fmt.Fprintf(env.stderr, "ballast %s: %v\n", c.name, err)
		return 1
	}
}

// shutdownTimeout bounds how long a role takes to stop after a signal.
const shutdownTimeout = 30 * time.Second

func newLogger(w io.Writer, level string) *slog.Logger { return cli.NewLogger(w, level) }

func versionString() string { return cli.VersionString("ballast", version) }

func init() {
	register(&command{
		name:    "version",
		summary: "print the version and exit",
		run: func(_ context.Context, env *cmdEnv, args []string) error {
			fs := newFlagSet(env, "version", "Usage: ballast version\n\nPrints the ballast version, its git revision when known, and the Go version.")
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			fmt.Fprintln(env.stdout, versionString())
			return nil
		},
	})
}
