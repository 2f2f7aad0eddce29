//go:build darwin || freebsd || netbsd

package blob

import "golang.org/x/sys/unix"

// errNoAttr is what getxattr(2) / extattr_get_fd(2) return for a missing
// attribute.
const errNoAttr = unix.ENOATTR
