package paging

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// MarshalPage returns the JSON object of page with "hasNextPage" after its
// fields, true when nextCursor is set: the paging shape of every list of the
// HTTP API. A list type's MarshalJSON passes itself converted to a type
// without methods (type plain T), so that marshalling page does not call
// that MarshalJSON again. page must marshal to a JSON object.
func MarshalPage(page any, nextCursor string) ([]byte, error) {
	b, err := json.Marshal(page)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("paging: a page must marshal to a JSON object, not %.20s", b)
	}
	b = b[:len(b)-1]
	if len(b) > 1 {
		b = append(b, ',')
	}
	b = append(b, `"hasNextPage":`...)
	b = strconv.AppendBool(b, nextCursor != "")
	return append(b, '}'), nil
}
