package consul

import (
	"time"

	consulapi "github.com/hashicorp/consul/api"
)

// Consul 1.15's gateway controller now and then never judges an entry it was given:
// the entry keeps an empty status, and the object's status would say Pending for good.
// An entry Consul passed over is written again with a new metaRejudge value, which
// Consul sees as a change and judges; at most maxRejudges times per content.
//
// After a cold start thousands of entries wait their turn for minutes, and Consul does
// not judge them in the order they were written. Waiting is not being passed over: an
// entry counts as passed over once it has waited judgeTimeout and Consul has judged
// none of ours for judgeTimeout. Counting an entry as passed over as soon as Consul
// judged one written judgeTimeout or more after it made 891 needless writes at a cold
// start of 10,000 routes (1,655 once the watch listed at most once a second), each
// judged again by the same busy Consul goroutine; Consul judged the same 10,500
// entries written directly with no write again (make bench, floor (c)).
const (
	judgeTimeout = 10 * time.Second
	maxRejudges  = 3
	// metaRejudge counts those writes. It is not part of the desired state: the
	// comparison with Consul's entry ignores it.
	metaRejudge = "gateway-controller-rejudge"
)

// judgedKinds are the entry kinds Consul gives a status.
var judgedKinds = map[string]bool{consulapi.APIGateway: true, consulapi.HTTPRoute: true, consulapi.TCPRoute: true}

// passedOver reports whether an entry that has waited since writtenAt counts as passed
// over at now, given how far Consul has come; otherwise how long to wait before
// looking again.
func passedOver(writtenAt time.Time, judged judgingProgress, now time.Time) (bool, time.Duration) {
	if waited := now.Sub(writtenAt); waited < judgeTimeout {
		return false, judgeTimeout - waited
	}
	if idle := now.Sub(judged.at); idle < judgeTimeout {
		return false, judgeTimeout - idle // Consul is still working through its backlog
	}
	return true, 0
}
