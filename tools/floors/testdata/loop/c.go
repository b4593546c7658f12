package loop

// C uses nothing.
func C() {}

// D closes the loop: c uses a.
func D() { A() }
