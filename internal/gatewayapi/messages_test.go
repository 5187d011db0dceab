package gatewayapi

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, tt := range []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefg…"},
		// "é" is two bytes: the cut moves back to the character's start.
		{"abcdeéfghij", 9, "abcde…"},
	} {
		got := Truncate(tt.in, tt.limit)
		if got != tt.want || len(got) > tt.limit || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q (%d bytes), want %q", tt.in, tt.limit, got, len(got), tt.want)
		}
	}
	if got := Truncate(strings.Repeat("x", MaxConditionMessage+1), MaxConditionMessage); len(got) > MaxConditionMessage {
		t.Errorf("a message cut to MaxConditionMessage has %d bytes", len(got))
	}
}
