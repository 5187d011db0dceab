// Package intentions keeps Consul's service intentions letting each API gateway of
// ours reach the services its routes send to.
//
// With ACLs on and intentions defaulting to deny (consul-k8s's manageSystemACLs), a
// backend's sidecar refuses the gateway's mTLS connection until the backend's
// service-intentions entry allows the gateway's Consul service as a source: every
// route would answer 403. The keeper adds, to the service-intentions entry of every
// service an owned route entry in Consul sends to (and every target of that service's
// discovery chain: its resolver's redirects and failovers, its splits), a source
// allowing the route's parent gateway, and removes the source once no route needs it.
//
// A service-intentions entry is one per destination and is shared: other sources in
// it, and the entry's other fields, are never changed. A source is ours only when its
// Description is the one this controller and cluster write (Marker); a source of
// another writer that names the gateway is left as it is, and none of ours is added
// beside it. Every write is a check-and-set on the entry's ModifyIndex, and an entry
// left with no source is deleted the same way. Entries that consul-k8s's
// ServiceIntentions resources manage (Meta external-source=kubernetes) are left to
// them: consul-k8s rewrites them whole.
//
// The routes are read from the route entries the Consul syncer's watch lists (package
// consul), so the intentions follow what Consul holds, including entries the syncer
// keeps for objects it could not confirm. Nothing is removed before both route kinds
// have been listed once.
//
// A Consul that lost its data lost the routes too: when the syncer's watch of a route
// kind fails or finds Consul's index gone back, nothing is written until it has listed
// the kind again from the Consul that answers now; then every destination is read and
// compared once, and what Consul lost is put back without waiting for the keeper's own
// watch. Each answer of that watch is judged against what the routes need, so a
// keeper whose entries are as needed reads and writes nothing.
package intentions
