package testenv

import (
	"fmt"
	"os/exec"
	"strings"
)

// Checkout is which commit a checkout is at, as the records in docs/ need it: figures
// and tables there are of commits of main only.
type Checkout struct {
	// Commit is HEAD's full hash.
	Commit string
	// Changed lists the tracked files that differ from HEAD, outside the paths ignored.
	Changed string
	// OnMain says HEAD is main or one of its ancestors.
	OnMain bool
}

// ReadCheckout reads the checkout at root. Paths in ignore (pathspecs) do not count as
// changes: a run that rewrites its own record leaves them changed.
func ReadCheckout(root string, ignore ...string) (Checkout, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	head, err := git("rev-parse", "HEAD")
	if err != nil {
		return Checkout{}, fmt.Errorf("git rev-parse HEAD: %w", err)
	}
	statusArgs := []string{"status", "--porcelain", "--untracked-files=no", "--", "."}
	for _, p := range ignore {
		statusArgs = append(statusArgs, ":(exclude)"+p)
	}
	changed, err := git(statusArgs...)
	if err != nil {
		return Checkout{}, fmt.Errorf("git status: %w", err)
	}
	_, notOnMain := git("merge-base", "--is-ancestor", head, "main")
	return Checkout{Commit: head, Changed: changed, OnMain: notOnMain == nil}, nil
}

// CommitOfMain says which commit of main the checkout at root is; an error when it is
// not one: the tree has changes outside ignore, or HEAD is not on main.
func CommitOfMain(root string, ignore ...string) (string, error) {
	c, err := ReadCheckout(root, ignore...)
	if err != nil {
		return "", err
	}
	if c.Changed != "" {
		return c.Commit, fmt.Errorf("the checkout has uncommitted changes:\n%s", c.Changed)
	}
	if !c.OnMain {
		return c.Commit, fmt.Errorf("commit %s is not on main", c.Commit)
	}
	return c.Commit, nil
}
