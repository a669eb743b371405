//go:build !linux

package cheap

// Available reports why [Trim] cannot give memory back here: only glibc on
// Linux has malloc_trim.
func Available() error { return ErrUnavailable }

// Trim does nothing outside Linux and returns [ErrUnavailable].
func Trim() (bool, error) { return false, ErrUnavailable }
