package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// sample is one line of the Prometheus text exposition format. A small parser of our
// own keeps the root module's requirements as they are: only the controller's series
// are read, and they never use exemplars or the protobuf format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is one /metrics answer.
type scrape []sample

// parseScrape parses the text format: comment lines are skipped, every other line is
// `name{label="value",...} value [timestamp]`.
func parseScrape(text string) (scrape, error) {
	var out scrape
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", n+1, line, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	end := strings.IndexAny(line, "{ \t")
	if end <= 0 {
		return s, errors.New("no value")
	}
	s.name, line = line[:end], line[end:]
	if strings.HasPrefix(line, "{") {
		rest, err := parseLabels(line[1:], s.labels)
		if err != nil {
			return s, err
		}
		line = rest
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return s, errors.New("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("value: %w", err)
	}
	s.value = v
	return s, nil
}

// parseLabels reads `name="value",...}` into labels and returns what follows the '}'.
func parseLabels(in string, labels map[string]string) (string, error) {
	for {
		in = strings.TrimLeft(in, " ,")
		if strings.HasPrefix(in, "}") {
			return in[1:], nil
		}
		eq := strings.IndexByte(in, '=')
		if eq <= 0 || len(in) < eq+2 || in[eq+1] != '"' {
			return "", errors.New("malformed label")
		}
		name := strings.TrimSpace(in[:eq])
		value, rest, err := unquote(in[eq+2:])
		if err != nil {
			return "", err
		}
		labels[name], in = value, rest
	}
}

// unquote reads a label value up to its closing quote, undoing the format's three
// escapes (\\, \" and \n), and returns the value and what follows the quote.
func unquote(in string) (string, string, error) {
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		switch c := in[i]; c {
		case '"':
			return b.String(), in[i+1:], nil
		case '\\':
			if i+1 == len(in) {
				return "", "", errors.New("unterminated escape")
			}
			i++
			if in[i] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte(in[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("unterminated label value")
}

// matches reports whether labels hold every pair of want.
func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// sum adds the values of name's samples whose labels include want.
func (s scrape) sum(name string, want map[string]string) float64 {
	var total float64
	for _, x := range s {
		if x.name == name && matches(x.labels, want) {
			total += x.value
		}
	}
	return total
}

// has reports whether any sample of name has labels including want.
func (s scrape) has(name string, want map[string]string) bool {
	for _, x := range s {
		if x.name == name && matches(x.labels, want) {
			return true
		}
	}
	return false
}

// labelValues lists the distinct values label takes on name's samples, in order of
// first appearance.
func (s scrape) labelValues(name, label string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range s {
		if v, ok := x.labels[label]; ok && x.name == name && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// histogramDelta is what a histogram recorded between two scrapes: how many
// observations, and their mean. ok is false when after has no such histogram.
type histogramDelta struct {
	count float64
	mean  float64
	ok    bool
}

// deltaHistogram subtracts before from after for the histogram name (its _sum and
// _count series, summed over every label set including want).
func deltaHistogram(before, after scrape, name string, want map[string]string) histogramDelta {
	if !after.has(name+"_count", want) {
		return histogramDelta{}
	}
	count := after.sum(name+"_count", want) - before.sum(name+"_count", want)
	sum := after.sum(name+"_sum", want) - before.sum(name+"_sum", want)
	d := histogramDelta{count: count, ok: true}
	if count > 0 {
		d.mean = sum / count
	}
	return d
}
