package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Memory is what the kernel reports about a process's resident set, in bytes.
type Memory struct {
	// PeakRSS is VmHWM, the most the resident set has been since the process started.
	PeakRSS int64
	// RSS is VmRSS, the resident set now.
	RSS int64
}

// Memory reads /proc/<pid>/status; it fails once the process has exited.
func (c *Controller) Memory() (Memory, error) { return ProcessMemory(c.Pid()) }

// ProcessMemory reads the resident set of process pid from /proc/<pid>/status.
func ProcessMemory(pid int) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	return parseProcStatus(f)
}

func parseProcStatus(r io.Reader) (Memory, error) {
	var m Memory
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		key, value, ok := strings.Cut(scanner.Text(), ":")
		if !ok || (key != "VmHWM" && key != "VmRSS") {
			continue
		}
		// The kernel writes these as "<n> kB".
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return m, fmt.Errorf("parse %s %q: %w", key, value, err)
		}
		if key == "VmHWM" {
			m.PeakRSS = kb * 1024
		} else {
			m.RSS = kb * 1024
		}
	}
	if err := scanner.Err(); err != nil {
		return m, err
	}
	if m.PeakRSS == 0 {
		return m, errors.New("no VmHWM in /proc status")
	}
	return m, nil
}

// CPUSeconds is the user plus system CPU time the process has used, from
// /proc/<pid>/stat; it fails once the process has exited.
func (c *Controller) CPUSeconds() (float64, error) { return ProcessCPUSeconds(c.Pid()) }

// ProcessCPUSeconds is the user plus system CPU time process pid has used.
func ProcessCPUSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(string(data))
}

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, 100 on every Linux
// architecture Go supports.
const userHZ = 100

func parseProcStatCPU(stat string) (float64, error) {
	// The command name (field 2) is in parentheses and may hold spaces; the fields
	// after the last ')' start at field 3 (state). utime and stime are fields 14, 15.
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	var ticks float64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc stat: %w", err)
		}
		ticks += float64(n)
	}
	return ticks / userHZ, nil
}
