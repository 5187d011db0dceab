// Package consul keeps Consul's config entries equal to the translation of the
// confirmed objects (package consul/translate) and reports Consul's verdicts back to
// the status pipeline. Syncer.Run first reads Consul's verdicts on the entries it
// holds and waits until every object that existed at start is confirmed; then it runs
// three loops:
//
//   - the translation: each batch of confirmed changes updates the desired entries
//     (translate.Translator) and queues the keys whose desired entry changed;
//   - the writers: a rate-limited queue of entry keys, whose workers write each entry
//     with check-and-set, create what is missing, and delete entries of ours that are
//     no longer desired (never one that another controller or cluster owns). One sync
//     gathers the entry's line of the ledger (ledger.go), decides (decide.go, pure),
//     performs the request (writer.go) and records the result (record.go);
//   - the watch: a blocking query per entry kind that records Consul's verdicts, puts
//     back entries that drifted, and notices a Consul that lost or replaced its data.
//
// ServiceNames, run on its own, follows the service names of Consul's catalog for
// the status pipeline. The catalog registration of gateway pods is a separate
// controller, in package consul/catalog.
//
// Words used throughout: an entry is a Consul config entry; the desired state is the
// translation of the confirmed objects (the objects whose status the API server holds
// as the status pipeline decided; see package sync); a verdict is Consul's Accepted
// condition on an entry of ours (and, on a route's entry, its Bound condition per
// parent listener), or the syncer's reason why the entry could not be written,
// reported back to the object's status; drift is an entry of ours that Consul holds
// with other content than desired.
package consul
