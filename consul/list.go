package consul

import (
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
	var raw []json.RawMessage
	meta, err := s.cfg.Client.Raw().Query("/v1/config/"+kind, &raw, s.listOptions(ctx, index))
	if err != nil {
		return nil, nil, err
	}
	entries := make([]consulapi.ConfigEntry, 0, len(raw))
	for _, r := range raw {
		entry, err := decodeEntry(kind, r)
		if err != nil {
			return nil, nil, fmt.Errorf("decode a %s entry: %w", kind, err)
		}
		entries = append(entries, entry)
	}
	return entries, meta, nil
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
