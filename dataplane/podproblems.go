package dataplane

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/pods"
)

// Waiting reasons the kubelet reports for containers that are on their way to
// running: progress, not a problem.
const (
	reasonContainerCreating = "ContainerCreating"
	reasonPodInitializing   = "PodInitializing"
)

// Waiting reasons whose reports firstPodProblem rewrites into a form that stays the same
// while the kubelet retries (see containerProblem).
const (
	reasonCrashLoopBackOff = "CrashLoopBackOff"
	reasonImagePullBackOff = "ImagePullBackOff"
)

// pullReasons are the waiting reasons of a failed image pull, which the kubelet
// alternates with ImagePullBackOff at each try.
var pullReasons = map[string]bool{
	"ErrImagePull": true, reasonImagePullBackOff: true, "RegistryUnavailable": true, "SignatureValidationFailed": true,
}

// maxReported is how many bytes of one message from a pod (a waiting message, a
// termination message, the scheduler's) the Gateway's status carries.
const maxReported = 256

// firstPodProblem says what the first of the gateway pods, by name, that reports a problem
// says: "pod <namespace>/<name>: <problem>", followed by how many more pods report
// one; "" when none does. Ready pods, pods on their way out and pods that only report
// progress (scheduled, creating their containers, running but not Ready yet) report
// nothing.
//
// The Gateway's status is written whenever this text changes, so it holds nothing
// that changes while a pod keeps failing the same way: no restart count, no back-off
// time, no timestamp of a log line.
func firstPodProblem(gatewayPods []*corev1.Pod) string {
	sorted := slices.SortedFunc(slices.Values(gatewayPods), func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	var problems []string
	for _, pod := range sorted {
		if why := podProblem(pod); why != "" {
			problems = append(problems, fmt.Sprintf("pod %s/%s: %s", pod.Namespace, pod.Name, why))
		}
	}
	switch len(problems) {
	case 0:
		return ""
	case 1:
		return problems[0]
	case 2:
		return problems[0] + " (and 1 more pod)"
	default:
		return fmt.Sprintf("%s (and %d more pods)", problems[0], len(problems)-1)
	}
}

// podProblem is what keeps one pod from being Ready: the scheduler's answer, or the
// first container (init containers first) that reports a problem.
func podProblem(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pods.Ready(pod) {
		return ""
	}
	if why := unscheduled(pod); why != "" {
		return why
	}
	for _, s := range pod.Status.InitContainerStatuses {
		if why := containerProblem(s, true); why != "" {
			return "init container " + s.Name + ": " + why
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if why := containerProblem(s, false); why != "" {
			return "container " + s.Name + ": " + why
		}
	}
	return ""
}

// unscheduled is the scheduler's reason and message for a pod it has not placed
// (Unschedulable: "0/3 nodes are available: ..."); "" for a scheduled pod.
func unscheduled(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			return withMessage(c.Reason, c.Message)
		}
	}
	return ""
}

// containerProblem is what a container that is not Ready reports, in a form that
// stays the same while the kubelet retries:
//   - a crash loop is "CrashLoopBackOff; last exit <code> (<reason>): <message>",
//     also in the seconds the container runs between two crashes, and without the
//     kubelet's back-off message (its time grows at each crash);
//   - ErrImagePull (or RegistryUnavailable, SignatureValidationFailed) and
//     ImagePullBackOff, which alternate at each try, are all "ImagePullBackOff: <the
//     pull's error>";
//   - any other waiting reason but progress is "<reason>: <message>"
//     (CreateContainerConfigError: secret "x" not found).
//
// A completed init container reports nothing.
func containerProblem(s corev1.ContainerStatus, init bool) string {
	if s.Ready || (init && s.State.Terminated != nil && s.State.Terminated.ExitCode == 0) {
		return ""
	}
	waiting := s.State.Waiting
	reason := ""
	if waiting != nil {
		reason = waiting.Reason
	}
	switch {
	case reason == reasonCrashLoopBackOff || (waiting == nil && s.RestartCount > 0):
		return reasonCrashLoopBackOff + lastExit(s)
	case pullReasons[reason]:
		return withMessage(reasonImagePullBackOff, cmp.Or(pullError(waiting.Message), fmt.Sprintf("cannot pull image %q", s.Image)))
	case reason == "" || reason == reasonContainerCreating || reason == reasonPodInitializing:
		return ""
	default:
		return withMessage(reason, waiting.Message)
	}
}

// lastExit describes the container's latest exit: "; last exit 1 (Error): <the last
// line of its termination message>"; "" when it has none.
func lastExit(s corev1.ContainerStatus) string {
	t := cmp.Or(s.State.Terminated, s.LastTerminationState.Terminated)
	if t == nil {
		return ""
	}
	text := fmt.Sprintf("; last exit %d", t.ExitCode)
	if t.Reason != "" {
		text += " (" + t.Reason + ")"
	}
	if line := reportedLine(t.Message); line != "" {
		text += ": " + line
	}
	return text
}

// backOffPulling starts the kubelet's ImagePullBackOff message, which then repeats the
// previous pull's error: "Back-off pulling image "<image>": <reason>: <message of
// that reason>".
const backOffPulling = "Back-off pulling image "

// pullErrorReason is the reason the back-off message repeats before the message.
var pullErrorReason = regexp.MustCompile(`^[A-Z][A-Za-z]*: `)

// pullError is the error of an image pull as its own reason's message says it, from
// that message or from an ImagePullBackOff message; "" when the back-off message does
// not repeat it.
func pullError(message string) string {
	rest, ok := strings.CutPrefix(message, backOffPulling)
	if !ok {
		return message
	}
	// The image is quoted with %q, so `": ` ends it.
	_, previous, found := strings.Cut(rest, `": `)
	if !found {
		return ""
	}
	return pullErrorReason.ReplaceAllString(previous, "")
}

// withMessage is "<reason>: <message>" with message made one reported line, or
// reason alone for an empty message.
func withMessage(reason, message string) string {
	if line := reportedLine(message); line != "" {
		return reason + ": " + line
	}
	return reason
}

// logTimestamp is the time a log line starts with (hclog's and Envoy's formats among
// others), which a termination message taken from the container's log
// (terminationMessagePolicy FallbackToLogsOnError) repeats at each crash.
var logTimestamp = regexp.MustCompile(`^\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}([.,]\d+)?(Z|[+-]\d{2}:?\d{2})?\]?\s*`)

// reportedLine is the part of a message from a pod the Gateway's status carries: its
// last line that holds anything (where a log ends with the error that stopped the
// process), without a leading log timestamp, control characters made spaces, and cut
// to maxReported bytes.
func reportedLine(message string) string {
	lines := strings.Split(strings.ToValidUTF8(message, "\uFFFD"), "\n")
	line := ""
	for i := len(lines) - 1; i >= 0 && line == ""; i-- {
		line = strings.TrimSpace(lines[i])
	}
	line = logTimestamp.ReplaceAllString(line, "")
	line = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, line)
	return gatewayapi.Truncate(line, maxReported)
}
