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
