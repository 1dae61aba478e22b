package models

import "fmt"

// Problems collects validation problems in the order they are found.
type Problems []Problem

func (p *Problems) Add(pointer, format string, args ...any) {
	*p = append(*p, Problem{Pointer: pointer, Message: fmt.Sprintf(format, args...)})
}
