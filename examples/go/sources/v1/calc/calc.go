// Package calc parses and adds numbers.
package calc

import "strconv"

// Parse reads a number; ok is false when s is not one.
func Parse(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Add adds with a ceiling.
func Add(a, b int) int {
	if a+b > 1000 {
		return 1000
	}
	return a + b
}

// Acc accumulates.
type Acc struct{ sum int }

// Push adds n to the accumulator.
func (a *Acc) Push(n int) { a.sum += n }

// Sum is the total so far.
func (a Acc) Sum() int { return a.sum }
