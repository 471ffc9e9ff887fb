// Package enum reads the name tables of the gateway's small enumerations:
// a uint8 type, its iota constants, and an array of their wire names in
// the same order. The table is the type's one list of names; Name and
// Parse are its String and its parser, written once instead of once per
// type, so every type treats a value past its table (a newer peer's, a
// field of garbage) and an unknown name the same way.
package enum

// Name returns names[v], or fallback when v is past the table (a String
// method must not panic on a value it does not know).
func Name[T ~uint8](names []string, v T, fallback string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fallback
}

// Parse returns the value named s, or the zero value and false when no
// entry is s. An empty entry is the placeholder of an unset value, not a
// name: the empty string parses to nothing.
func Parse[T ~uint8](names []string, s string) (T, bool) {
	if s != "" {
		for i, n := range names {
			if n == s {
				return T(i), true
			}
		}
	}
	return 0, false
}
