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
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"
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
	ctx, stop := signalContext()
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

// signalContext is cancelled on the first SIGINT or SIGTERM; a second one
// exits at once (status 130), for an operator who does not want to wait for
// shutdown. The returned stop function releases the signals.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	released := make(chan struct{})
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-released:
			return
		}
		// Wait on released, not ctx: ctx is already cancelled here.
		select {
		case <-ch:
			fmt.Fprintln(os.Stderr, "ballast: second signal, exiting now")
			os.Exit(130)
		case <-released:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(released)
			cancel()
		})
	}
}

// shutdownTimeout bounds how long a role takes to stop after a signal.
const shutdownTimeout = 30 * time.Second

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	switch level {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		return fmt.Sprintf("ballast %s, %s", v, bi.GoVersion)
	}
	return "ballast " + v
}

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
