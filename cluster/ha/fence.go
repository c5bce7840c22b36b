package ha

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrFenced is returned when a commit carries an epoch lower than one the
// resource has already seen: a newer leader exists, and this one is
// deposed.
var ErrFenced = errors.New("fenced: a newer leader has acted")

// FenceFile is the fencing token check of a resource on a filesystem that
// both mds processes reach (the files driver's layout store, shared
// exports): a file holding the highest epoch seen. Check-and-commit runs
// under an exclusive flock, so a deposed leader that resumes after a pause
// (SIGSTOP, a long GC, a frozen VM) and tries to commit with its old epoch
// is refused once the new leader has raised the fence — which it does when
// it takes over, before it acts.
type FenceFile struct{ Path string }

// Raise records epoch as seen (a new leader calls it first). It fails with
// ErrFenced if a higher epoch is already recorded.
func (f FenceFile) Raise(epoch uint64) error { return f.Commit(epoch, nil) }

// Commit runs commit under the fence: if epoch is at least the highest
// recorded, epoch is recorded and commit runs while no other process can
// pass the fence; otherwise nothing runs and ErrFenced is returned. A nil
// commit only raises the fence.
func (f FenceFile) Commit(epoch uint64, commit func() error) error {
	fd, err := os.OpenFile(f.Path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("cannot open fence %q: %w", f.Path, err)
	}
	defer fd.Close()
	if err := syscall.Flock(int(fd.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("cannot lock fence %q: %w", f.Path, err)
	}
	buf := make([]byte, 32)
	n, _ := fd.ReadAt(buf, 0)
	var seen uint64
	if s := strings.TrimSpace(string(buf[:n])); s != "" {
		if seen, err = strconv.ParseUint(s, 10, 64); err != nil {
			return fmt.Errorf("cannot read fence %q: %q is not an epoch", f.Path, s)
		}
	}
	if epoch < seen {
		return fmt.Errorf("%w (epoch %d < %d recorded in %s)", ErrFenced, epoch, seen, f.Path)
	}
	if epoch > seen {
		if err := fd.Truncate(0); err != nil {
			return fmt.Errorf("cannot write fence %q: %w", f.Path, err)
		}
		if _, err := fd.WriteAt([]byte(strconv.FormatUint(epoch, 10)+"\n"), 0); err != nil {
			return fmt.Errorf("cannot write fence %q: %w", f.Path, err)
		}
		if err := fd.Sync(); err != nil {
			return fmt.Errorf("cannot sync fence %q: %w", f.Path, err)
		}
	}
	if commit == nil {
		return nil
	}
	return commit()
}

// Seen returns the highest epoch recorded (0 when none).
func (f FenceFile) Seen() (uint64, error) {
	b, err := os.ReadFile(f.Path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cannot read fence %q: %w", f.Path, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, nil
	}
	return strconv.ParseUint(s, 10, 64)
}
