package consul

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	consulapi "github.com/hashicorp/consul/api"
)

// listKind lists every entry of kind from index on (a blocking query when index is
// not 0). consul/api's List decodes each entry into a generic map and then into its
// type by reflection, which at thousands of entries cost the drift watch most of its
// CPU and memory; here each entry is decoded straight into its type, and only an
// entry that does not fit (a field of a newer Consul that needs conversion) takes
// consul/api's path.
func (s *Syncer) listKind(ctx context.Context, kind string, index uint64) ([]consulapi.ConfigEntry, *consulapi.QueryMeta, error) {
	list := entryList{kind: kind}
	meta, err := s.cfg.Client.Raw().Query("/v1/config/"+kind, &list, s.listOptions(ctx, index))
	if err != nil {
		return nil, nil, err
	}
	return list.entries, meta, nil
}

// entryList decodes a list of entries of one kind one element at a time, from the
// answer's bytes: a copy of every element (as []json.RawMessage would make) doubled
// what a list of thousands of entries holds while it is decoded.
type entryList struct {
	kind    string
	entries []consulapi.ConfigEntry
}

func (l *entryList) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	switch {
	case err != nil:
		return fmt.Errorf("decode a list of %s entries: %w", l.kind, err)
	case tok == nil:
		return nil // null: no entries
	case tok != json.Delim('['):
		return fmt.Errorf("a list of %s entries is not a JSON array", l.kind)
	}
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("decode a %s entry: %w", l.kind, err)
		}
		entry, err := decodeEntry(l.kind, raw)
		if err != nil {
			return fmt.Errorf("decode a %s entry: %w", l.kind, err)
		}
		l.entries = append(l.entries, entry)
	}
	return nil
}

// decodeEntry decodes one entry of kind.
func decodeEntry(kind string, raw []byte) (consulapi.ConfigEntry, error) {
	var entry consulapi.ConfigEntry
	switch kind {
	case consulapi.APIGateway:
		entry = &consulapi.APIGatewayConfigEntry{}
	case consulapi.HTTPRoute:
		entry = &consulapi.HTTPRouteConfigEntry{}
	case consulapi.TCPRoute:
		entry = &consulapi.TCPRouteConfigEntry{}
	case consulapi.InlineCertificate:
		entry = &consulapi.InlineCertificateConfigEntry{}
	case consulapi.ServiceDefaults:
		entry = &consulapi.ServiceConfigEntry{}
	}
	if entry != nil && json.Unmarshal(raw, entry) == nil && entry.GetKind() == kind {
		return entry, nil
	}
	return consulapi.DecodeConfigEntryFromJSON(raw)
}
