//go:build linux || darwin || freebsd || netbsd

package blob

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// setXattr sets an extended attribute on an open file. Setting it on the
// temporary file before the rename makes content and metadata one atomic unit.
func setXattr(f *os.File, name, value string) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.Fsetxattr(int(fd), name, []byte(value), 0)
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "setxattr " + name, Path: f.Name(), Err: serr}
	}
	return nil
}

// getXattr reads an extended attribute of an open file; ok is false when the
// file does not have it (e.g. a file copied into the directory by hand).
func getXattr(f *os.File, name string) (value string, ok bool, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return "", false, err
	}
	buf := make([]byte, 256)
	for {
		var n int
		var gerr error
		if err := rc.Control(func(fd uintptr) {
			n, gerr = unix.Fgetxattr(int(fd), name, buf)
		}); err != nil {
			return "", false, err
		}
		switch {
		case gerr == nil:
			return string(buf[:n]), true, nil
		case errors.Is(gerr, errNoAttr):
			return "", false, nil
		case errors.Is(gerr, unix.ERANGE) && len(buf) < 64<<10:
			buf = make([]byte, len(buf)*4)
		default:
			return "", false, &os.PathError{Op: "getxattr " + name, Path: f.Name(), Err: gerr}
		}
	}
}
