package consul

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	gosync "sync"
)

// This file decodes Consul's list answers as they arrive. consul/api reads an answer
// with a json.Decoder, which holds the whole answer before decoding any of it and
// grows its buffer by doubling: 14 MB of JSON per http-route list at 5,000 routes, one
// list every few seconds while routes change, and the garbage of those buffers was
// the largest share of the controller's allocations and so of its peak memory. Its
// Raw().Query offers no way to read the body itself; StreamListAnswers is a transport
// below it that hands the body of a list the syncer asked to stream (by its request's
// context) to the list's own decoder, element by element, and gives consul/api an
// empty answer in its place. Everything else consul/api does (the address, TLS, the
// token, the query options, the query meta from the headers) is unchanged.

// StreamListAnswers wraps a Consul client's transport: the answers of lists asked
// through an EntryLister or the syncer's watch are decoded while they are read. A
// client without it decodes them after consul/api has read each whole.
func StreamListAnswers(next http.RoundTripper) http.RoundTripper {
	return listStreamer{next: next}
}

type listStreamer struct{ next http.RoundTripper }

// bodyReaderKey is the request context's key of the function that reads a streamed
// list's body.
type bodyReaderKey struct{}

func withBodyReader(ctx context.Context, read func(io.Reader) error) context.Context {
	return context.WithValue(ctx, bodyReaderKey{}, read)
}

// nullBody is what consul/api reads of a streamed answer: no entries, which the list's
// decoder ignores once it has read the real answer.
const nullBody = "null"

func (s listStreamer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	read, ok := req.Context().Value(bodyReaderKey{}).(func(io.Reader) error)
	if err != nil || !ok || resp.StatusCode != http.StatusOK {
		return resp, err // consul/api reads the error's body itself
	}
	err = read(resp.Body)
	_, _ = io.Copy(io.Discard, resp.Body) // what follows the array, so the connection is reused
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(strings.NewReader(nullBody))
	resp.ContentLength = int64(len(nullBody))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// streamArrayElements reads a JSON array from r and calls f with the bytes of each
// element, which are valid until f returns; null is an empty array. It returns how
// many bytes it read. It finds an element's end without decoding (the first comma or
// closing bracket outside any string and nested value); f's decoding checks the
// element itself.
func streamArrayElements(r io.Reader, f func([]byte) error) (int, error) {
	buffered := readers.Get().(*bufio.Reader)
	buffered.Reset(r)
	defer func() {
		buffered.Reset(nil) // hold no body
		readers.Put(buffered)
	}()
	br := &countingReader{r: buffered}
	first, err := br.nextNonSpace()
	switch {
	case err != nil:
		return br.n, fmt.Errorf("read the answer: %w", err)
	case first == 'n':
		rest := make([]byte, 3)
		if _, err := io.ReadFull(br, rest); err != nil || string(rest) != "ull" {
			return br.n, errors.New("the answer is not a JSON array")
		}
		return br.n, nil
	case first != '[':
		return br.n, errors.New("the answer is not a JSON array")
	}
	var elem []byte
	depth, inString, escaped := 0, false, false
	for {
		c, err := br.ReadByte()
		if err != nil {
			return br.n, fmt.Errorf("the answer ends inside its array: %w", err)
		}
		if inString {
			elem = append(elem, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case depth == 0 && (c == ',' || c == ']'):
			if len(elem) > 0 {
				if err := f(elem); err != nil {
					return br.n, err
				}
			} else if c == ',' {
				return br.n, errors.New("an empty element in the answer's array")
			}
			elem = elem[:0]
			if c == ']' {
				return br.n, nil
			}
			continue
		}
		elem = append(elem, c)
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
}

// readers are the buffers lists are read through: the watches list every few
// milliseconds while entries are written, mostly small answers.
var readers = gosync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// countingReader counts the bytes read through it.
type countingReader struct {
	r *bufio.Reader
	n int
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func (c *countingReader) nextNonSpace() (byte, error) {
	for {
		b, err := c.ReadByte()
		if err != nil || (b != ' ' && b != '\t' && b != '\n' && b != '\r') {
			return b, err
		}
	}
}
