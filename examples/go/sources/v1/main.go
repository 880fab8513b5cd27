// A small program whose coverage the integration tests read: each run takes
// words on the command line and takes different branches for them.
package main

import (
	"fmt"
	"os"

	"example.com/goprog/calc"
	"example.com/goprog/text"
)

func main() {
	total := 0
	for _, arg := range os.Args[1:] {
		if n, ok := calc.Parse(arg); ok {
			total = calc.Add(total, n)
			continue
		}
		fmt.Println(text.Shout(arg))
	}
	if total > 100 {
		fmt.Println("big", total)
	} else {
		fmt.Println("small", total)
	}
}
