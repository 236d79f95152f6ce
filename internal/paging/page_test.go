package paging_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/internal/paging"
)

type list struct {
	Items      []string `json:"items"`
	NextCursor string   `json:"cursor,omitempty"`
}

func (l list) MarshalJSON() ([]byte, error) {
	type plain list
	return paging.MarshalPage(plain(l), l.NextCursor)
}

// TestMarshalPage: a page is its fields and "hasNextPage", true exactly when
// there is a cursor, also inside another value; an empty object stays valid
// JSON and a value that is no object is refused.
func TestMarshalPage(t *testing.T) {
	b, err := json.Marshal(list{Items: []string{"a"}, NextCursor: "c<1>"})
	require.NoError(t, err)
	require.Equal(t, `{"items":["a"],"cursor":"c\u003c1\u003e","hasNextPage":true}`, string(b))

	b, err = json.Marshal(&list{})
	require.NoError(t, err)
	require.Equal(t, `{"items":null,"hasNextPage":false}`, string(b))

	b, err = json.Marshal(map[string]*list{"p": {Items: []string{}}})
	require.NoError(t, err)
	require.Equal(t, `{"p":{"items":[],"hasNextPage":false}}`, string(b))

	b, err = paging.MarshalPage(struct{}{}, "x")
	require.NoError(t, err)
	require.Equal(t, `{"hasNextPage":true}`, string(b))

	_, err = paging.MarshalPage([]int{1}, "")
	require.ErrorContains(t, err, "JSON object")
}
