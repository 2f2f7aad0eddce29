package blob

import "golang.org/x/sys/unix"

// errNoAttr is what getxattr(2) returns for a missing attribute.
const errNoAttr = unix.ENODATA
