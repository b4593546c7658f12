package loop

// Z uses T and its field (t.go) and its method (m.go); its own local names are no use.
func Z(t T) int {
	local := t.F
	t.M()
	return local
}
