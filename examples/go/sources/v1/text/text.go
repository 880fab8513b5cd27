// Package text transforms words.
package text

import "strings"

// Shout upper-cases a word, or each of its dash-separated parts.
func Shout(s string) string {
	if strings.Contains(s, "-") {
		parts := strings.Split(s, "-")
		for i := range parts {
			parts[i] = strings.ToUpper(parts[i])
		}
		return strings.Join(parts, "!")
	}
	up := func(x string) string { return strings.ToUpper(x) + "!" }
	return up(s)
}

// Unused is never called.
func Unused(n int) int {
	if n > 0 {
		return n * 2
	}
	return -n
}
