// Package cli holds what the ballast and ballast-agent commands share:
// flag sets whose --help goes to stdout, the usage error that exits 2, the
// signal context, the logger and the version line. It imports nothing of
// ballast, so the agent binary stays free of the store (docs/decisions.md).
package cli

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
)

// ErrUsage marks errors caused by how a command was called; the commands
// exit 2 on it.
var ErrUsage = errors.New("usage error")

// NewFlagSet returns a FlagSet whose --help prints usage text, then the
// flags with their defaults, to stdout; parse errors go to stderr.
func NewFlagSet(stdout, stderr io.Writer, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fs.SetOutput(stdout)
		fmt.Fprintf(stdout, "%s\n\nFlags:\n", strings.TrimSpace(usage))
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	return fs
}

// ParseFlags parses args with fs and maps flag errors to ErrUsage.
// It returns flag.ErrHelp unchanged so callers exit 0 after --help.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return nil
}

// SignalContext is cancelled on the first SIGINT or SIGTERM; a second one
// exits at once (status 130), for an operator who does not want to wait
// for shutdown. The returned stop function releases the signals.
func SignalContext(prog string) (context.Context, func()) {
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
			fmt.Fprintln(os.Stderr, prog+": second signal, exiting now")
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

// NewLogger returns a text logger at level (debug, info, warn, error;
// anything else is info).
func NewLogger(w io.Writer, level string) *slog.Logger {
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

// VersionString is "PROG VERSION (REVISION), GOVERSION", the revision when
// the build recorded one.
func VersionString(prog, version string) string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		return fmt.Sprintf("%s %s, %s", prog, v, bi.GoVersion)
	}
	return prog + " " + v
}
