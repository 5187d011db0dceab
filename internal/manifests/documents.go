// Package manifests reads YAML manifests as a user writes them: several documents in
// one stream, comments between them.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Documents splits a YAML (or JSON) stream into its documents, leaving out those that
// hold nothing but comments and blank lines.
func Documents(data []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if hasContent(doc) {
			docs = append(docs, doc)
		}
	}
}

// hasContent reports whether a YAML document has a line that is neither blank nor a
// comment.
func hasContent(doc []byte) bool {
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return true
		}
	}
	return false
}
