package blob_test

import (
	"github.com/yuxi-serverless/yuxi/shared/blob"
)

func keysOf(list []blob.Info) []string {
	keys := make([]string, len(list))
	for i, in := range list {
		keys[i] = in.Key
	}
	return keys
}
