// Package ids checks the two identifiers every part of monky-deployd passes around: an
// environment's env_id and a bundle's sha. Each shape is checked here and nowhere else.
//
// The package imports nothing but the standard library, so that every package of the
// module can import it.
package ids

// EnvIDPattern is the shape of an env_id as a regular expression, for messages: "env-",
// a tier of lowercase letters and digits, "-" and two digits ("env-dev-01").
const EnvIDPattern = `^env-[a-z0-9]+-[0-9]{2}$`

// ValidEnvID reports whether s is an env_id: it matches EnvIDPattern.
func ValidEnvID(s string) bool {
	const prefix = "env-"
	if len(s) < len(prefix)+1+3 || s[:len(prefix)] != prefix {
		return false
	}
	tier, nn := s[len(prefix):len(s)-3], s[len(s)-3:]
	for i := 0; i < len(tier); i++ {
		if c := tier[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return nn[0] == '-' && isDigit(nn[1]) && isDigit(nn[2])
}

// ValidSHA reports whether s is a bundle sha: 64 lowercase hexadecimal digits (a
// SHA-256 as `sha256sum` prints it).
func ValidSHA(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isDigit(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
