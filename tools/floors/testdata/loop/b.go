package loop

// B uses c.
func B() { C() }
