package envoy

import (
	"errors"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Header mutations as Envoy's HeaderParser applies one level of them
// (source/common/router/header_parser.cc, HeaderParser::evaluateHeaders): removals
// first, then, for the additions, the overwrites and then the appends; an addition
// whose value is empty is dropped unless keep_empty_value. Values are Envoy's
// substitution formats: "%%" is a literal "%", "%NAME%" a command operator.

// headerLevel is anything that carries request and response header mutations: a
// route configuration, a virtual host, a route, a weighted cluster.
type headerLevel interface {
	GetRequestHeadersToAdd() []*corev3.HeaderValueOption
	GetRequestHeadersToRemove() []string
	GetResponseHeadersToAdd() []*corev3.HeaderValueOption
	GetResponseHeadersToRemove() []string
}

func requestOps(l headerLevel) headerOps {
	return headerOps{add: l.GetRequestHeadersToAdd(), remove: l.GetRequestHeadersToRemove()}
}

func responseOps(l headerLevel) headerOps {
	return headerOps{add: l.GetResponseHeadersToAdd(), remove: l.GetResponseHeadersToRemove()}
}

// headerOps is one level's request or response mutations.
type headerOps struct {
	add    []*corev3.HeaderValueOption
	remove []string
}

// apply mutates headers (lower-case names) and returns the names it removed.
func (o headerOps) apply(headers map[string][]string) ([]string, error) {
	var removed []string
	for _, name := range o.remove {
		name = strings.ToLower(name)
		delete(headers, name)
		removed = append(removed, name)
	}
	type kv struct{ k, v string }
	var overwrite, appendix []kv
	for _, opt := range o.add {
		name := strings.ToLower(opt.GetHeader().GetKey())
		value, err := formatHeaderValue(opt.GetHeader().GetValue())
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
		if value == "" && !opt.GetKeepEmptyValue() {
			continue
		}
		switch appendAction(opt) {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			appendix = append(appendix, kv{name, value})
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if len(headers[name]) == 0 {
				appendix = append(appendix, kv{name, value})
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
			overwrite = append(overwrite, kv{name, value})
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if len(headers[name]) > 0 {
				overwrite = append(overwrite, kv{name, value})
			}
		default:
			return nil, fmt.Errorf("%w: header append action %s", ErrNotModelled, opt.GetAppendAction())
		}
	}
	for _, h := range overwrite {
		headers[h.k] = []string{h.v}
	}
	for _, h := range appendix {
		headers[h.k] = append(headers[h.k], h.v)
	}
	return removed, nil
}

// appendAction: the deprecated append field, which Consul 1.15 sets, wins when set
// (true appends, false overwrites); otherwise append_action, whose default appends.
func appendAction(opt *corev3.HeaderValueOption) corev3.HeaderValueOption_HeaderAppendAction {
	if a := opt.GetAppend(); a != nil { //nolint:staticcheck // see above
		if a.GetValue() {
			return corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		}
		return corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
	}
	return opt.GetAppendAction()
}

// errUnterminated is Envoy's refusal of a value with a lone "%".
var errUnterminated = errors.New("invalid header configuration: un-terminated variable expression")

// formatHeaderValue evaluates a header value format: "%%" gives "%"; a command
// operator ("%NAME%" or "%NAME(arg)%") would need the stream's data and is not modelled.
func formatHeaderValue(v string) (string, error) {
	if !strings.Contains(v, "%") {
		return v, nil
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		if i+1 < len(v) && v[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		end := strings.IndexByte(v[i+1:], '%')
		if end < 0 {
			return "", fmt.Errorf("%w in %q", errUnterminated, v)
		}
		return "", fmt.Errorf("%w: command operator %s in header value", ErrNotModelled, v[i:i+end+2])
	}
	return b.String(), nil
}

// validateHeaderOps: Envoy refuses mutations of pseudo-headers (":"-prefixed) and of
// host, and values with a lone "%". (source/common/router/header_parser.cc,
// HeaderParser::configure: ":-prefixed or host headers may not be modified";
// source/common/http/header_utility.cc, isModifiableHeader.)
func validateHeaderOps(where string, o headerOps) error {
	var errs []error
	for _, opt := range o.add {
		key := opt.GetHeader().GetKey()
		if !modifiableHeader(key) {
			errs = append(errs, fmt.Errorf("%s: %q: :-prefixed or host headers may not be modified", where, key))
		}
		// A command operator is refused as not modelled: Envoy takes the ones it
		// knows and refuses the others, and their values change per request.
		if _, err := formatHeaderValue(opt.GetHeader().GetValue()); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	for _, name := range o.remove {
		if !modifiableHeader(name) {
			errs = append(errs, fmt.Errorf("%s: %q: :-prefixed or host headers may not be removed", where, name))
		}
	}
	return errors.Join(errs...)
}

func modifiableHeader(name string) bool {
	return !strings.HasPrefix(name, ":") && !strings.EqualFold(name, "host")
}
