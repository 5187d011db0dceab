package gatewayapi

import "unicode/utf8"

// MaxConditionMessage is the most a condition's message may hold (metav1.Condition).
const MaxConditionMessage = 32768

// Truncate cuts s to at most limit bytes at a character boundary, ending it with an
// ellipsis ("…") when it cut: for condition messages, Event notes and what a pod
// reports, whose length the API server bounds.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const ellipsis = "…"
	cut := max(limit-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
