//go:build !(linux || darwin || freebsd || netbsd)

package blob

import (
	"errors"
	"os"
)

// Extended attributes are not wired up on this platform, so NewLocal reports
// the directory as unsupported.

func setXattr(*os.File, string, string) error { return errors.ErrUnsupported }

func getXattr(*os.File, string) (string, bool, error) { return "", false, errors.ErrUnsupported }
