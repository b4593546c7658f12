package loop

// M is a method of T, declared away from it.
func (T) M() {}
