package testenv

import (
	"strings"
	"testing"
)

func TestParseProcStatus(t *testing.T) {
	status := "Name:\tconsul-gateway\nVmPeak:\t 2000000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nThreads:\t12\n"
	got, err := parseProcStatus(strings.NewReader(status))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Memory{PeakRSS: 50 << 20, RSS: 40 << 20}); got != want {
		t.Errorf("parseProcStatus = %+v, want %+v", got, want)
	}
	if _, err := parseProcStatus(strings.NewReader("Name:\tx\n")); err == nil {
		t.Error("a status without VmHWM parsed")
	}
}

func TestParseProcStatCPU(t *testing.T) {
	// The command name may hold spaces and parentheses; utime 250 and stime 50 ticks.
	stat := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	got, err := parseProcStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 3 {
		t.Errorf("parseProcStatCPU = %v, want 3", got)
	}
}
