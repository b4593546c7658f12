// Package loop is the test package of floors: a, b and c use each other in a loop,
// z uses a type of t and a method of m.
package loop

// A uses b.
func A() { B() }
