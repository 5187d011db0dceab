package main

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// machine is what the figures were measured on.
type machine struct {
	cpu    string
	cores  int
	memory int64
	goVer  string
}

func readMachine() machine {
	m := machine{cpu: "unknown", cores: runtime.NumCPU(), goVer: runtime.Version()}
	if v := procField("/proc/cpuinfo", "model name"); v != "" {
		m.cpu = v
	}
	if v := procField("/proc/meminfo", "MemTotal"); v != "" {
		kb, _ := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
		m.memory = kb * 1024
	}
	return m
}

// procField is the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		k, v, ok := strings.Cut(scanner.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
