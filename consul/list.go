package consul

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io"

	consulapi "github.com/hashicorp/consul/api"
)

// listKind lists every entry of kind from index on (a blocking query when index is
// not 0). consul/api's List decodes each entry into a generic map and then into its
// type by reflection, which at thousands of entries cost the drift watch most of its
// CPU and memory; here each entry is decoded straight into its type, and only an
// entry that does not fit (a field of a newer Consul that needs conversion) takes
// consul/api's path.
//
// known is what the caller's previous list of kind decoded (nil for none), and is
// replaced by this list's: an element whose bytes did not change is not decoded again.
func (s *Syncer) listKind(ctx context.Context, kind string, index uint64, known *knownEntries) (entryListAnswer, error) {
	return listEntries(s.cfg.Client, kind, s.listOptions(ctx, index), known)
}

func listEntries(client *consulapi.Client, kind string, q *consulapi.QueryOptions, known *knownEntries) (entryListAnswer, error) {
	list := &entryList{kind: kind, known: known}
	q = q.WithContext(withBodyReader(q.Context(), list.readStream))
	meta, err := client.Raw().Query("/v1/config/"+kind, list, q)
	if err != nil {
		return entryListAnswer{}, err
	}
	return entryListAnswer{entries: list.entries, meta: meta, size: list.size}, nil
}

// EntryLister lists the entries of one kind as the syncer's watch does: each entry
// decoded straight into its type, and an element unchanged since the lister's previous
// answer not decoded again. The entries it returns are shared between its answers:
// callers must not modify them. A list from index 0 (a fresh read) decodes everything.
type EntryLister struct {
	client *consulapi.Client
	kind   string
	known  *knownEntries
}

// NewEntryLister lists kind through client.
func NewEntryLister(client *consulapi.Client, kind string) *EntryLister {
	return &EntryLister{client: client, kind: kind, known: newKnownEntries()}
}

// List lists every entry of the kind with q (a blocking query when q.WaitIndex is not
// 0). size is the answer's JSON in bytes, for WatchPause.
func (l *EntryLister) List(q *consulapi.QueryOptions) (entries []consulapi.ConfigEntry, meta *consulapi.QueryMeta, size int, err error) {
	if q.WaitIndex == 0 {
		l.known.forget()
	}
	answer, err := listEntries(l.client, l.kind, q, l.known)
	if err != nil {
		return nil, nil, 0, err
	}
	return answer.entries, answer.meta, answer.size, nil
}

// entryListAnswer is Consul's answer to a list of one kind.
type entryListAnswer struct {
	entries []consulapi.ConfigEntry
	meta    *consulapi.QueryMeta
	// size is the answer's JSON in bytes, uncompressed: what Consul encoded.
	size int
}

// knownEntries is what a list decoded, by a seeded hash of each element's bytes.
// Consul answers every change with the whole kind, so during edits at thousands of
// entries decoding the unchanged ones cost the watch most of its CPU; an element with
// the same bytes decodes to the same entry, which nobody modifies, so it is reused.
// Two different elements share a hash with odds of about n²/2⁶⁴ per list (the seed is
// this process's own); even then the watch's next fresh read, which starts with no
// known entries, decodes everything again.
type knownEntries struct {
	seed    maphash.Seed
	byBytes map[uint64]consulapi.ConfigEntry
}

func newKnownEntries() *knownEntries {
	return &knownEntries{seed: maphash.MakeSeed()}
}

// forget drops every known entry.
func (k *knownEntries) forget() { k.byBytes = nil }

// entryList decodes a list of entries of one kind one element at a time: from the
// answer's body as it arrives, when the client streams lists (StreamListAnswers), else
// from the answer's bytes. A copy of every element (as []json.RawMessage would make)
// doubled what a list of thousands of entries holds while it is decoded.
type entryList struct {
	kind    string
	known   *knownEntries
	entries []consulapi.ConfigEntry
	size    int
	// streamed is set once the transport has read the answer (readStream); consul/api
	// then decodes an empty answer, which changes nothing.
	streamed bool
}

func (l *entryList) readStream(r io.Reader) error {
	l.streamed = true
	return l.read(r)
}

func (l *entryList) UnmarshalJSON(data []byte) error {
	if l.streamed {
		return nil
	}
	return l.read(bytes.NewReader(data))
}

func (l *entryList) read(r io.Reader) error {
	var decoded map[uint64]consulapi.ConfigEntry
	if l.known != nil {
		decoded = make(map[uint64]consulapi.ConfigEntry, len(l.known.byBytes))
	}
	size, err := streamArrayElements(r, func(raw []byte) error {
		entry, err := l.decode(raw, decoded)
		if err != nil {
			return fmt.Errorf("decode a %s entry: %w", l.kind, err)
		}
		l.entries = append(l.entries, entry)
		return nil
	})
	l.size = size
	if err != nil {
		return fmt.Errorf("a list of %s entries: %w", l.kind, err)
	}
	if l.known != nil {
		l.known.byBytes = decoded
	}
	return nil
}

// decode decodes one element, or reuses the entry the previous list decoded from the
// same bytes, and records it in decoded.
func (l *entryList) decode(raw []byte, decoded map[uint64]consulapi.ConfigEntry) (consulapi.ConfigEntry, error) {
	if l.known == nil {
		return decodeEntry(l.kind, raw)
	}
	h := maphash.Bytes(l.known.seed, raw)
	if entry, ok := l.known.byBytes[h]; ok {
		decoded[h] = entry
		return entry, nil
	}
	entry, err := decodeEntry(l.kind, raw)
	if err != nil {
		return nil, err
	}
	decoded[h] = entry
	return entry, nil
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
	case consulapi.ServiceResolver:
		entry = &consulapi.ServiceResolverConfigEntry{}
	case consulapi.ServiceRouter:
		entry = &consulapi.ServiceRouterConfigEntry{}
	case consulapi.ServiceSplitter:
		entry = &consulapi.ServiceSplitterConfigEntry{}
	case consulapi.ServiceIntentions:
		entry = &consulapi.ServiceIntentionsConfigEntry{}
	}
	if entry != nil && json.Unmarshal(raw, entry) == nil && entry.GetKind() == kind {
		return entry, nil
	}
	return consulapi.DecodeConfigEntryFromJSON(raw)
}
