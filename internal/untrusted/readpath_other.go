//go:build !unix

package untrusted

// ReadPath reads the file at path, following symlinks anywhere (the caller
// trusts the path itself, as the user named it): at most max bytes, and an
// error wrapping ErrTooLarge if it holds more. Like OpenPath it reads only
// a regular file.
func ReadPath(path string, max int64) ([]byte, error) {
	f, info, err := OpenPath(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, info, path, max)
}
