package loop

// T is a type with a field.
type T struct{ F int }
